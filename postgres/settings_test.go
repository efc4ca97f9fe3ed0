package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/postgres"
	"github.com/hold-dev/hold/postgres/pgtest"
)

// TestRoleDefaultsDoNotEndWaits: a role whose sessions default to
// lock_timeout and statement_timeout of a second and to repeatable-read
// transactions still waits as long as its context says, and a waiter
// queued behind another waiter gets the lock when its turn comes (under
// repeatable read, the lock's row changed since its statement began).
func TestRoleDefaultsDoNotEndWaits(t *testing.T) {
	s := needServer(t)
	raw := rawConn(t)
	ctx := ctxFor(t, hangLimit)
	// The table exists before the role takes a lock, so that the role
	// owns nothing and can be dropped.
	l, err := hold.Acquire(ctx, "", lockOpts(dial(t), uniqueName(t))...)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	role := fmt.Sprintf("hold_dba_%d", os.Getpid())
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN SUPERUSER`,
		`ALTER ROLE ` + role + ` SET lock_timeout = '1s'`,
		`ALTER ROLE ` + role + ` SET statement_timeout = '1s'`,
		`ALTER ROLE ` + role + ` SET default_transaction_isolation = 'repeatable read'`,
		`ALTER ROLE ` + role + ` SET idle_in_transaction_session_timeout = '1s'`,
	} {
		if _, err := raw.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { raw.Exec(context.Background(), `DROP ROLE IF EXISTS `+role) })
	dialRole := func() *postgres.Protocol {
		p, err := postgres.Dial(ctxFor(t, hangLimit), s.URLAs(role, "postgres"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	// The role's settings are in force for its plain sessions.
	c, err := pgx.Connect(ctx, s.URLAs(role, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var lt string
	if err := c.QueryRow(ctx, `SHOW lock_timeout`).Scan(&lt); err != nil || lt != "1s" {
		t.Fatalf("the role's lock_timeout = %q, %v; want 1s", lt, err)
	}
	c.Close(ctx)

	name := uniqueName(t)
	holder, err := hold.Acquire(ctx, "", lockOpts(dialRole(), name)...)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		l   *hold.Lock
		err error
	}
	first, second := make(chan grant, 1), make(chan grant, 1)
	go func() {
		l, err := hold.Acquire(ctxFor(t, 30*time.Second), "", lockOpts(dialRole(), name)...)
		first <- grant{l, err}
	}()
	eventually(t, "first waiter queued", func() bool { return len(sessions(t, raw, name, false)) == 1 })
	go func() {
		l, err := hold.Acquire(ctxFor(t, 30*time.Second), "", lockOpts(dialRole(), name)...)
		second <- grant{l, err}
	}()
	eventually(t, "second waiter queued", func() bool { return len(sessions(t, raw, name, false)) == 2 })
	// Held for three times the timeouts the role sets.
	time.Sleep(3 * time.Second)
	select {
	case g := <-first:
		t.Fatalf("first waiter returned while the holder held the lock: %v", g.err)
	case g := <-second:
		t.Fatalf("second waiter returned while the holder held the lock: %v", g.err)
	default:
	}
	tokens := []uint64{holder.Token()}
	if err := holder.Release(); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []chan grant{first, second} {
		select {
		case g := <-ch:
			if g.err != nil {
				t.Fatalf("waiter %d: %v", i+1, g.err)
			}
			tokens = append(tokens, g.l.Token())
			time.Sleep(1500 * time.Millisecond) // past the role's timeouts
			if err := g.l.Check(); err != nil {
				t.Fatalf("waiter %d's lock after %s: %v", i+1, 1500*time.Millisecond, err)
			}
			if err := g.l.Release(); err != nil {
				t.Fatal(err)
			}
		case <-time.After(hangLimit):
			t.Fatalf("waiter %d not granted the lock", i+1)
		}
	}
	if !(tokens[0] < tokens[1] && tokens[1] < tokens[2]) {
		t.Errorf("tokens in grant order %v: want strictly rising", tokens)
	}
}

// TestPinnedSettingsInAddress: an address that sets one of the settings
// hold fixes for its sessions to another value is refused, saying why.
func TestPinnedSettingsInAddress(t *testing.T) {
	s := needServer(t)
	for _, q := range []string{"lock_timeout=1000", "statement_timeout=5s", "synchronous_commit=off"} {
		_, err := postgres.Dial(ctxFor(t, hangLimit), s.ConnString()+"&"+q)
		name, _, _ := strings.Cut(q, "=")
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "hold sets") {
			t.Errorf("Dial with %s in the address = %v, want an error naming it", q, err)
		}
	}
	p, err := postgres.Dial(ctxFor(t, hangLimit), s.ConnString()+"&lock_timeout=0")
	if err != nil {
		t.Fatalf("Dial with lock_timeout=0, the value hold sets: %v", err)
	}
	p.Close()
}

// TestTokensSurviveCrash: on a server whose sessions commit
// asynchronously by default (synchronous_commit=off), tokens handed out
// just before a crash are not handed out again after it. The WAL writer
// sleeps its longest between rounds, so that what an asynchronous commit
// leaves in the WAL buffers is lost in the crash, as it can be on any
// server. In the later rounds the sequence's record that covers hold's
// tokens is written by another session, which commits asynchronously (an
// application, or an older hold, taking a value from the sequence just
// after a checkpoint): hold's acquisitions must see it on disk too.
func TestTokensSurviveCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own PostgreSQL server")
	}
	s, err := pgtest.StartWith("synchronous_commit=off", "wal_writer_delay=10000")
	if errors.Is(err, pgtest.ErrNoServer) {
		testenv.MissingTool(t, "PostgreSQL", err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var last uint64
	take := func(round int) []uint64 {
		p, err := postgres.Dial(ctxFor(t, hangLimit), s.ConnString())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if round > 0 {
			c, err := pgx.Connect(ctxFor(t, hangLimit), s.ConnString())
			if err != nil {
				t.Fatal(err)
			}
			// The first value after a checkpoint logs the sequence ahead.
			var v int64
			if _, err := c.Exec(ctxFor(t, hangLimit), `CHECKPOINT`); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRow(ctxFor(t, hangLimit), `SELECT nextval('hold_locks_fence')`).Scan(&v); err != nil {
				t.Fatal(err)
			}
			c.Close(context.Background())
		}
		var tokens []uint64
		for i := 0; i < 5; i++ {
			l, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, fmt.Sprintf("crash-%d", i))...)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			tokens = append(tokens, l.Token())
			if l.Token() <= last {
				t.Errorf("round %d: token %d after %d: a token was handed out twice", round, l.Token(), last)
			}
			last = l.Token()
			if err := l.Release(); err != nil {
				t.Fatal(err)
			}
		}
		return tokens
	}
	for round := 0; round < 4; round++ {
		t.Logf("round %d: tokens %v", round, take(round))
		if err := s.CrashRestart(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("after the last crash: %v", take(0))
}

// TestBreakSparesSessionThatLetGo: a forced break ends the holder's
// session only if it still holds the lock. If it let go between Break's
// reading of the holder and the end, Break leaves it alone, and says who
// holds the lock now.
func TestBreakSparesSessionThatLetGo(t *testing.T) {
	needServer(t)
	p := dial(t)
	name := uniqueName(t)
	// The holder is a plain session; the lock changes hands inside Break.
	was := rawConn(t)
	ctx := ctxFor(t, hangLimit)
	if _, err := was.Exec(ctx, `SELECT pg_advisory_lock($1::bigint)`, postgres.Key(name)); err != nil {
		t.Fatal(err)
	}
	var wasPID int32
	if err := was.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&wasPID); err != nil {
		t.Fatal(err)
	}
	var next *hold.Lock
	defer postgres.SetBeforeTerminate(func() {
		if _, err := was.Exec(ctx, `SELECT pg_advisory_unlock($1::bigint)`, postgres.Key(name)); err != nil {
			t.Error(err)
		}
		var err error
		if next, err = hold.Acquire(ctx, "", lockOpts(dial(t), name)...); err != nil {
			t.Error(err)
		}
	})()
	st, err := p.Break(name, true)
	if !errors.Is(err, hold.ErrBusy) {
		t.Errorf("Break of a lock that changed hands = %v, want ErrBusy", err)
	}
	t.Log(err)
	if err := was.Ping(ctx); err != nil {
		t.Errorf("the session that let go of the lock was ended: %v", err)
	}
	if next == nil {
		t.Fatal("no new holder")
	}
	if err := next.Check(); err != nil {
		t.Errorf("the new holder after the break: %v", err)
	}
	if st == nil || st.Holder == nil || st.Holder.Owner == nil || st.Holder.Owner.Fence != next.Token() {
		t.Errorf("Break reported %+v, want the new holder", st)
	}
	next.Release()
}
