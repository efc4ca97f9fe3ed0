package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/faultnet"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/postgres"
	"github.com/hold-dev/hold/postgres/pgtest"
)

// partitionStopWithin is the StopWithin the partitioned holder asks for.
const partitionStopWithin = 3 * time.Second

// TestPartitionedHolder: a holder cut off from the server, by a real
// partition (a network namespace whose link is taken down, so that
// neither side's socket hears anything) and behind a TCP proxy that stops
// forwarding (the server's socket to the proxy stays healthy), loses its
// lock to a waiter within the documented bound, the session timeout after
// its last heartbeat; and it is told so at least StopWithin before the
// waiter gets the lock.
func TestPartitionedHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the session timeout")
	}
	if _, err := pgtest.FindBin(); err != nil {
		needServer(t)
	}
	t.Run("netns", func(t *testing.T) {
		t.Parallel()
		link, err := faultnet.NewLink()
		if err != nil {
			testenv.MissingTool(t, "network namespaces", err.Error())
		}
		defer link.Close()
		srv, err := pgtest.StartListening(link.HostIP)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		holderConn := srv.URLVia(link.HostIP, srv.Port, "postgres")
		partitionTrial(t, srv.ConnString(), holderConn, link.Wrap, func() {
			if err := link.Cut(); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("proxy", func(t *testing.T) {
		t.Parallel()
		s := needServer(t)
		px, err := faultnet.NewProxy(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer px.Close()
		holderConn := s.URLVia("127.0.0.1", px.Port(), "postgres")
		partitionTrial(t, s.ConnString(), holderConn, nil, px.Cut)
	})
}

// partitionTrial starts a holder process connected by holderConn (its
// command line wrapped by wrap, if set), queues a waiter on conn, cuts the
// holder off, and checks when each side learns what.
func partitionTrial(t *testing.T, conn, holderConn string, wrap func(...string) []string, cut func()) {
	name := uniqueName(t)
	cmd := testenv.Command(workerEnv+"=hold-until-lost", envConn+"="+holderConn, envName+"="+name,
		"HOLD_PG_TEST_STOP_WITHIN="+partitionStopWithin.String())
	if wrap != nil {
		argv := wrap(cmd.Args...)
		env := cmd.Env
		cmd = exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "held ") {
		t.Fatalf("holder said %q", lines.Text())
	}
	lostAt := make(chan time.Time, 1)
	go func() {
		for lines.Scan() {
			if f := strings.Fields(lines.Text()); len(f) == 2 && f[0] == "lost" {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				lostAt <- time.Unix(0, n)
				return
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := postgres.Dial(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bound := p.SessionBound()
	got := make(chan error, 1)
	var acquiredAt time.Time
	go func() {
		l, err := hold.Acquire(ctx, "", lockOpts(p, name)...)
		if err == nil {
			acquiredAt = time.Now()
			err = l.Release()
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond) // queued behind the holder
	cutAt := time.Now()
	cut()
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	took := acquiredAt.Sub(cutAt)
	t.Logf("the waiter got the lock %s after the cut (documented bound: the session timeout, %s, after the holder's last heartbeat)", took.Round(time.Millisecond), bound)
	// Generous: the bound itself plus time for a loaded machine.
	if took > bound+10*time.Second {
		t.Errorf("the waiter got the lock %s after the cut, bound %s", took, bound)
	}
	select {
	case at := <-lostAt:
		early := acquiredAt.Sub(at)
		t.Logf("the holder was told %s before the waiter got the lock (it asked for %s)", early.Round(time.Millisecond), partitionStopWithin)
		if early < partitionStopWithin {
			t.Errorf("the holder was told %s before the waiter got the lock, want at least StopWithin %s", early, partitionStopWithin)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the holder never said it lost the lock")
	}
}

// holdUntilLost takes the lock with StopWithin, says "held TOKEN", then
// "lost UNIXNANO" when Lost fires, and waits to be killed.
func holdUntilLost() error {
	ctx := context.Background()
	p, err := postgres.Dial(ctx, os.Getenv(envConn))
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(os.Getenv("HOLD_PG_TEST_STOP_WITHIN"))
	if err != nil {
		return err
	}
	l, err := hold.Acquire(ctx, "", hold.WithProtocol(p), hold.LockFile(os.Getenv(envName)), hold.StopWithin(d))
	if err != nil {
		return err
	}
	fmt.Println("held", l.Token())
	<-l.Lost()
	fmt.Println("lost", time.Now().UnixNano())
	if err := l.Check(); !errors.Is(err, hold.ErrLost) {
		return fmt.Errorf("Check after Lost = %v", err)
	}
	time.Sleep(time.Minute)
	return nil
}
