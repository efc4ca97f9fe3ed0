// Package pgcli serves hold's PostgreSQL address schemes: a target
// "postgres://user@host:port/database#name" (or "postgresql://...") takes the
// lock of that name in that database. Both companion executables register it:
// hold-postgres, which links no other network backend so that a postgres://
// command starts without initialising the etcd client and gRPC, and
// hold-remote, which serves every scheme.
//
// It is the twin of etcdcli, etcd's scheme: both register with lockspec,
// the request code the command line and the agent share, and both take
// their defaults from their backend package.
package pgcli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/postgres"
)

// Everything about the connection but the lock name is libpq's: query
// parameters (sslmode, sslrootcert, ...) and the PG* environment variables
// (PGPASSWORD, PGSSLMODE, ...), which keep the password out of process lists.

// Register makes hold resolve postgres:// and postgresql:// targets (for
// run, status, break, ls and the agent). Call it once, from an init function of the
// executable's main package.
func Register() {
	for _, scheme := range []string{"postgres", "postgresql"} {
		lockspec.RegisterScheme(scheme, resolvePostgres)
		lockspec.RegisterListScheme(scheme, resolvePostgresList)
		lockspec.RegisterSessionScheme(scheme, postgresSession)
	}
}

// resolvePostgresList is resolvePostgres for `hold ls`: the part after #
// is a prefix of lock names, and may be left out to list every lock.
func resolvePostgresList(target string, _ *lockspec.Spec) (hold.Protocol, string, error) {
	connString, prefix, err := postgres.ParseListAddress(target)
	if err != nil {
		return nil, "", errkind.Usagef("%v", err)
	}
	p, err := dialPostgres(connString, nil, 1)
	if err != nil {
		return nil, "", err
	}
	return p, prefix, nil
}

// resolvePostgres connects to the database a postgres:// target names and
// returns the protocol and the lock name.
func resolvePostgres(target string, spec *lockspec.Spec) (hold.Protocol, string, error) {
	connString, name, err := postgres.ParseAddress(target)
	if err != nil {
		return nil, "", errkind.Usagef("%v", err)
	}
	// One lock per process: a released session has no later use.
	p, err := dialPostgres(connString, spec, 1)
	if err != nil {
		return nil, "", err
	}
	return p, name, nil
}

// postgresSession is resolvePostgres for a protocol that is kept for many
// requests (lockspec.KeepSessions): its key is the connection string,
// everything but the lock's name (the PG* variables it reads are the
// process's own), and a released lock's connection is kept for the next
// one, as a Go program's protocol keeps it.
func postgresSession(target string, spec *lockspec.Spec) (*lockspec.Session, error) {
	connString, name, err := postgres.ParseAddress(target)
	if err != nil {
		return nil, errkind.Usagef("%v", err)
	}
	return &lockspec.Session{Key: "postgres " + connString, Path: name, Dial: func() (hold.Protocol, error) {
		p, err := dialPostgres(connString, spec, postgres.DefaultMaxIdle)
		if err != nil {
			return nil, err
		}
		return p, nil
	}}, nil
}

// dialPostgres connects to the database of a postgres:// target, within
// the request's wait if it has one (nil: the default bound), keeping up to
// maxIdle released connections. The connection attempt itself is bounded
// by the address's connect_timeout, else postgres.DefaultDialTimeout; the
// context adds a second to that, so that the backend's own bound, with its
// clearer error, ends a slow connection first.
func dialPostgres(connString string, spec *lockspec.Spec, maxIdle int) (*postgres.Protocol, error) {
	ctx, cancel := context.WithTimeout(context.Background(), spec.DialTimeout(postgres.DefaultDialTimeout+time.Second))
	defer cancel()
	return postgres.Dial(ctx, connString, postgres.WithMaxIdle(maxIdle),
		postgres.WithOutageNotice(func(msg string) { fmt.Fprintln(os.Stderr, msg) }))
}
