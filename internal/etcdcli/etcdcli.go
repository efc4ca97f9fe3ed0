// Package etcdcli serves hold's etcd address scheme: a target
// "etcd://host:port[,host:port...]/key" takes the lock on an etcd cluster.
// hold-remote registers it; hold itself does not link it, so that a local
// lock never pays for initialising the etcd client and gRPC.
//
// It is the twin of pgcli, PostgreSQL's scheme: both register with
// lockspec, the request code the command line and the agent share, and
// both take their defaults from their backend package.
package etcdcli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
)

// Connection settings come from flags or from the environment
// (lockspec.EtcdCA, ...), never from the address, so that credentials stay
// out of process lists and `hold status` output.

// Register makes hold resolve etcd:// targets (for run, status, break, ls
// and the agent). Call it once, from an init function of the executable's
// main package.
func Register() {
	lockspec.RegisterScheme("etcd", resolveEtcd)
	lockspec.RegisterSessionScheme("etcd", etcdSession)
}

// resolveEtcd connects to the cluster an etcd:// target names and returns
// the protocol and the key.
func resolveEtcd(target string, spec *lockspec.Spec) (hold.Protocol, string, error) {
	ses, err := etcdSession(target, spec)
	if err != nil {
		return nil, "", err
	}
	p, err := ses.Dial()
	if err != nil {
		return nil, "", err
	}
	return p, ses.Path, nil
}

// etcdSession checks an etcd:// target and its settings and says how to
// connect. The first connection is bounded by etcd.DefaultDialTimeout, and
// by the request's wait when it has a shorter one
// (lockspec.Spec.DialTimeout). The session key is everything the protocol
// keeps from the request: the endpoints, the credentials and the lease's
// TTL (the dial's bound is spent once connected), so that an agent that
// keeps protocols (lockspec.KeepSessions) shares one lease only between
// locks that asked for the same.
func etcdSession(target string, spec *lockspec.Spec) (*lockspec.Session, error) {
	eps, key, err := etcd.ParseAddress(target)
	if err != nil {
		return nil, errkind.Usagef("%v", err)
	}
	ttl := etcd.DefaultTTL
	if v := lockspec.EtcdTTL.Value(spec); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs < 1 || secs > 24*3600 {
			return nil, errkind.Usagef("--ttl wants a number of seconds between 1 and 86400, not %q", v)
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
		DialTimeout: spec.DialTimeout(etcd.DefaultDialTimeout),
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, errkind.Usagef("etcd needs both a user and a password (--etcd-user/$HOLD_ETCD_USER, $HOLD_ETCD_PASSWORD), or neither")
	}
	sessionKey, _ := json.Marshal([]any{cfg.Endpoints, cfg.CAFile, cfg.CertFile, cfg.KeyFile, cfg.Username, cfg.Password, ttl})
	return &lockspec.Session{Key: "etcd " + string(sessionKey), Path: key, Dial: func() (hold.Protocol, error) {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout+time.Second)
		defer cancel()
		p, err := etcd.Dial(ctx, cfg, etcd.WithTTL(ttl), etcd.RedactFlags("--"+lockspec.EtcdPassword.Flag),
			etcd.WithOutageNotice(func(msg string) { fmt.Fprintln(os.Stderr, msg) }))
		if err != nil {
			return nil, err
		}
		return p, nil
	}}, nil
}
