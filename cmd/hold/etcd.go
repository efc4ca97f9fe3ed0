package main

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
)

// The etcd address scheme: a target "etcd://host:port[,host:port...]/key"
// takes the lock on an etcd cluster. Connection settings come from flags or
// from the environment, never from the address, so that credentials stay
// out of process lists and `hold status` output.

// etcdSetting is one connection setting: its flag and the environment
// variable used when the flag is not given.
type etcdSetting struct {
	flag, env, usage string
}

var (
	etcdCA       = etcdSetting{"etcd-ca", "HOLD_ETCD_CA", "CA certificate `FILE` to verify etcd's servers (TLS)"}
	etcdCert     = etcdSetting{"etcd-cert", "HOLD_ETCD_CERT", "client certificate `FILE` for etcd (TLS)"}
	etcdKey      = etcdSetting{"etcd-key", "HOLD_ETCD_KEY", "client key `FILE` for etcd (TLS)"}
	etcdUser     = etcdSetting{"etcd-user", "HOLD_ETCD_USER", "etcd user `NAME`"}
	etcdPassword = etcdSetting{"etcd-password", "HOLD_ETCD_PASSWORD", "etcd `PASSWORD` (prefer the environment variable: a flag shows in process lists)"}
	etcdTTL      = etcdSetting{"ttl", "HOLD_ETCD_TTL", "lease TTL in `SECONDS` for etcd locks: how long a crashed holder blocks others, and how long a paused one keeps the lock"}
	etcdSettings = []etcdSetting{etcdCA, etcdCert, etcdKey, etcdUser, etcdPassword, etcdTTL}
)

// etcdDialTimeout bounds how long hold waits for a first connection.
const etcdDialTimeout = 5 * time.Second

func init() {
	registerLockFlag(func(fs *pflag.FlagSet) func() ([]hold.Option, error) {
		for _, s := range etcdSettings {
			usage := s.usage + " (default $" + s.env
			if s == etcdTTL {
				usage += ", else " + strconv.Itoa(int(etcd.DefaultTTL/time.Second))
			}
			fs.String(s.flag, "", usage+")")
		}
		return func() ([]hold.Option, error) { return nil, nil }
	})
	registerScheme("etcd", resolveEtcd)
}

// value returns the value of s: its flag if given, else its variable.
func (s etcdSetting) value(fs *pflag.FlagSet) string {
	if fs != nil {
		if f := fs.Lookup(s.flag); f != nil && f.Changed {
			return f.Value.String()
		}
	}
	return os.Getenv(s.env)
}

// resolveEtcd connects to the cluster an etcd:// target names and returns
// the protocol and the key.
func resolveEtcd(target string, fs *pflag.FlagSet) (hold.Protocol, string, error) {
	eps, key, err := etcd.ParseAddress(target)
	if err != nil {
		return nil, "", usagef("%v", err)
	}
	ttl := etcd.DefaultTTL
	if v := etcdTTL.value(fs); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs < 1 || secs > 24*3600 {
			return nil, "", usagef("--ttl wants a number of seconds between 1 and 86400, not %q", v)
		}
		ttl = time.Duration(secs * float64(time.Second))
	}
	cfg := etcd.Config{
		Endpoints:   eps,
		CAFile:      etcdCA.value(fs),
		CertFile:    etcdCert.value(fs),
		KeyFile:     etcdKey.value(fs),
		Username:    etcdUser.value(fs),
		Password:    etcdPassword.value(fs),
		DialTimeout: etcdDialTimeout,
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, "", usagef("etcd needs both a user and a password (--etcd-user/$HOLD_ETCD_USER, $HOLD_ETCD_PASSWORD), or neither")
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdDialTimeout+time.Second)
	defer cancel()
	p, err := etcd.Dial(ctx, cfg, etcd.WithTTL(ttl), etcd.RedactFlags("--"+etcdPassword.flag))
	if err != nil {
		return nil, "", err
	}
	return p, key, nil
}
