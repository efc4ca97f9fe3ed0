package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/holdtest"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/postgres"
	"github.com/hold-dev/hold/postgres/pgtest"
)

// workerEnv names the role a re-executed test binary plays.
const workerEnv = "HOLD_PG_TEST_WORKER"

// server is the PostgreSQL server every test shares, started by TestMain;
// nil when the server binaries are absent (noServer says why).
var (
	server   *pgtest.Server
	noServer error
)

// workers are the roles of worker processes that tests of some systems
// add (see semaphore_linux_test.go): each runs this process as its worker
// if a test started it as one.
var workers []func() (code int, ok bool)

func TestMain(m *testing.M) {
	if code, ok := holdtest.RunWorker(pgSubject); ok {
		os.Exit(code)
	}
	for _, w := range workers {
		if code, ok := w(); ok {
			os.Exit(code)
		}
	}
	if role := os.Getenv(workerEnv); role != "" {
		os.Exit(runWorker(role))
	}
	var err error
	server, err = pgtest.Start()
	if errors.Is(err, pgtest.ErrNoServer) {
		noServer, server = err, nil
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL:", err)
		os.Exit(1)
	}
	code := testenv.Run(m)
	if server != nil {
		server.Close()
	}
	os.Exit(code)
}

// needServer skips the test when there is no server to test against.
func needServer(t testing.TB) *pgtest.Server {
	t.Helper()
	if server == nil {
		testenv.MissingTool(t, "PostgreSQL", noServer.Error())
	}
	return server
}

// dial connects a Protocol to the shared server.
func dial(t testing.TB, opts ...postgres.Option) *postgres.Protocol {
	t.Helper()
	s := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := postgres.Dial(ctx, s.ConnString(), opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// rawConn is a plain connection for inspecting and sabotaging locks.
func rawConn(t testing.TB) *pgx.Conn {
	t.Helper()
	s := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// uniqueName returns a lock name no other test uses.
func uniqueName(t testing.TB) string { return testenv.UniqueName(t, "test/") }

// lockOpts are the hold options that take name through p.
func lockOpts(p *postgres.Protocol, name string) []hold.Option {
	return []hold.Option{hold.WithProtocol(p), hold.LockFile(name)}
}
