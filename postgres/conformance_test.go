package postgres_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/holdtest"
	"github.com/hold-dev/hold/postgres"
)

// connEnv tells the conformance suite's workers where the test's server
// is.
const connEnv = "HOLD_PG_TEST_CONN"

var pgSubject = holdtest.Subject{
	Name: "postgres",
	Options: func() ([]hold.Option, func(), error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := postgres.Dial(ctx, os.Getenv(connEnv))
		if err != nil {
			return nil, nil, err
		}
		return []hold.Option{hold.WithProtocol(p)}, func() { p.Close() }, nil
	},
	Target: func(t *testing.T) string { return uniqueName(t) },
	// pg_advisory_lock_shared.
	Shared: true,
	// Many sessions queued on one advisory lock: the server's queue is
	// what is pressed.
	Workers:    16,
	Increments: 100,
	// The server frees a session's locks when its connection closes.
	CrashFree: 0,
	Lose: func(t *testing.T, l *hold.Lock) {
		raw := rawConn(t)
		pids := sessions(t, raw, l.Path(), true)
		if len(pids) != 1 {
			t.Fatalf("holder sessions %v, want one", pids)
		}
		// Wait for the session to end, so that the lock is gone when
		// Lose returns.
		if _, err := raw.Exec(context.Background(), `SELECT pg_terminate_backend($1, 5000)`, pids[0]); err != nil {
			t.Fatal(err)
		}
	},
}

func TestConformancePostgres(t *testing.T) {
	s := needServer(t)
	t.Setenv(connEnv, s.ConnString())
	subject := pgSubject
	subject.Env = []string{connEnv + "=" + s.ConnString()}
	holdtest.Run(t, subject)
}

// TestSemaphorePostgres runs holdtest's semaphore checks on PostgreSQL.
func TestSemaphorePostgres(t *testing.T) {
	s := needServer(t)
	t.Setenv(connEnv, s.ConnString())
	subject := pgSubject
	subject.Env = []string{connEnv + "=" + s.ConnString()}
	holdtest.RunSemaphore(t, subject)
}
