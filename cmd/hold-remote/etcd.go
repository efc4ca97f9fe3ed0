package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/internal/cli"
	"github.com/hold-dev/hold/internal/lockspec"
)

// The etcd address scheme: a target "etcd://host:port[,host:port...]/key"
// takes the lock on an etcd cluster. Connection settings come from flags or
// from the environment, never from the address, so that credentials stay
// out of process lists and `hold status` output.

// etcdDialTimeout bounds how long hold waits for a first connection; -w
// bounds it further (lockspec.Spec.DialTimeout).
const etcdDialTimeout = 5 * time.Second

func init() {
	cli.RegisterScheme("etcd", resolveEtcd)
}

// resolveEtcd connects to the cluster an etcd:// target names and returns
// the protocol and the key.
func resolveEtcd(target string, spec *lockspec.Spec) (hold.Protocol, string, error) {
	eps, key, err := etcd.ParseAddress(target)
	if err != nil {
		return nil, "", cli.Usagef("%v", err)
	}
	ttl := etcd.DefaultTTL
	if v := lockspec.EtcdTTL.Value(spec); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs < 1 || secs > 24*3600 {
			return nil, "", cli.Usagef("--ttl wants a number of seconds between 1 and 86400, not %q", v)
		}
		ttl = time.Duration(secs * float64(time.Second))
	}
	cfg := etcd.Config{
		Endpoints:   eps,
		CAFile:      lockspec.EtcdCA.Value(spec),
		CertFile:    lockspec.EtcdCert.Value(spec),
		KeyFile:     lockspec.EtcdKey.Value(spec),
		Username:    lockspec.EtcdUser.Value(spec),
		Password:    lockspec.EtcdPassword.Value(spec),
		DialTimeout: spec.DialTimeout(etcdDialTimeout),
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, "", cli.Usagef("etcd needs both a user and a password (--etcd-user/$HOLD_ETCD_USER, $HOLD_ETCD_PASSWORD), or neither")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout+time.Second)
	defer cancel()
	p, err := etcd.Dial(ctx, cfg, etcd.WithTTL(ttl), etcd.RedactFlags("--"+lockspec.EtcdPassword.Flag),
		etcd.WithOutageNotice(func(msg string) { fmt.Fprintln(os.Stderr, msg) }))
	if err != nil {
		return nil, "", err
	}
	return p, key, nil
}
