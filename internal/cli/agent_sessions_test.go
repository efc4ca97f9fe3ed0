//go:build unix

package cli

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/postgres/pgtest"
)

// TestAgentKeepsEtcdSession: an agent takes 50 etcd locks in a row on one
// kept protocol (one lease granted, not one per lock), a lock asking for
// another TTL gets a protocol of its own, revoking the shared lease tells
// every lock on it that it is lost (and no other), the next lock gets a
// new lease, and the agent's end revokes what it kept. Counted on the
// server: the leases it granted.
func TestAgentKeepsEtcdSession(t *testing.T) {
	ep := startEtcd(t)
	addr := "etcd://" + ep + "/locks/kept"
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: hangLimit})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*hangLimit)
	defer cancel()
	leases := func() []clientv3.LeaseID {
		t.Helper()
		r, err := cli.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []clientv3.LeaseID
		for _, l := range r.Leases {
			ids = append(ids, l.ID)
		}
		return ids
	}

	c := startAgent(t, holdBin, t.TempDir())
	seen := map[clientv3.LeaseID]bool{}
	for i := range 50 {
		r := wantOK(t, c.request(fmt.Sprintf(`{"id":%d,"op":"acquire","target":"%s-%d"}`, i, addr, i%3)))
		for _, id := range leases() {
			seen[id] = true
		}
		wantOK(t, c.request(fmt.Sprintf(`{"id":"r%d","op":"release","lock":%v}`, i, r["lock"])))
	}
	if len(seen) != 1 {
		t.Fatalf("50 locks in a row through one agent were granted %d leases, want 1 (one kept protocol)", len(seen))
	}
	var shared clientv3.LeaseID
	for id := range seen {
		shared = id
	}

	// Three locks on the shared lease, one on a lease of another TTL.
	var onShared []string
	for i := range 3 {
		r := wantOK(t, c.request(fmt.Sprintf(`{"id":"s%d","op":"acquire","target":"%s-held-%d"}`, i, addr, i)))
		onShared = append(onShared, fmt.Sprint(r["lock"]))
	}
	other := wantOK(t, c.request(fmt.Sprintf(`{"id":"o","op":"acquire","target":"%s-other","settings":{"ttl":"7"}}`, addr)))
	if ids := leases(); len(ids) != 2 {
		t.Fatalf("leases with a lock of another TTL held: %v, want the shared one and another", ids)
	}
	if _, err := cli.Revoke(ctx, shared); err != nil {
		t.Fatal(err)
	}
	lost := map[string]bool{}
	for range onShared {
		lost[fmt.Sprint(c.event("lost")["lock"])] = true
	}
	for _, n := range onShared {
		if !lost[n] {
			t.Fatalf("lost events for %v, want every lock on the revoked lease (%v)", lost, onShared)
		}
	}
	wantOK(t, c.request(fmt.Sprintf(`{"id":"oc","op":"check","lock":%v}`, other["lock"])))
	for i, n := range onShared {
		wantCode(t, c.request(fmt.Sprintf(`{"id":"sr%d","op":"release","lock":%s}`, i, n)), "ELOST")
	}
	// The kept protocol grants a new lease for the next lock.
	again := wantOK(t, c.request(fmt.Sprintf(`{"id":"a","op":"acquire","target":"%s-again"}`, addr)))
	wantOK(t, c.request(fmt.Sprintf(`{"id":"ac","op":"check","lock":%v}`, again["lock"])))

	c.in.Close()
	if code := c.waitExit(); code != 0 {
		t.Fatalf("agent exit status %d", code)
	}
	// Released and revoked at the end, not left to expire.
	if ids := leases(); len(ids) != 0 {
		t.Fatalf("leases left after the agent ended: %v", ids)
	}
}

// TestAgentKeepsPostgresSession: an agent takes 50 PostgreSQL locks in a
// row on one connection (a released lock's session serves the next), and
// each held lock still has a session of its own: ending one tells that
// lock alone, and the next lock is served.
func TestAgentKeepsPostgresSession(t *testing.T) {
	srv, err := pgtest.Start()
	if errors.Is(err, pgtest.ErrNoServer) {
		testenv.MissingTool(t, "PostgreSQL", err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	base := fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable", pgtest.User, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 3*hangLimit)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// holders returns the server pids of the sessions holding an
	// advisory lock.
	holders := func() []int {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted ORDER BY pid`)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}

	c := startAgent(t, holdBin, t.TempDir())
	seen := map[int]bool{}
	for i := range 50 {
		r := wantOK(t, c.request(fmt.Sprintf(`{"id":%d,"op":"acquire","target":"%s#kept-%d"}`, i, base, i%3)))
		for _, pid := range holders() {
			seen[pid] = true
		}
		wantOK(t, c.request(fmt.Sprintf(`{"id":"r%d","op":"release","lock":%v}`, i, r["lock"])))
	}
	if len(seen) != 1 {
		t.Fatalf("50 locks in a row through one agent used %d sessions, want 1 (a kept connection)", len(seen))
	}

	a := wantOK(t, c.request(fmt.Sprintf(`{"id":"a","op":"acquire","target":"%s#held-a"}`, base)))
	b := wantOK(t, c.request(fmt.Sprintf(`{"id":"b","op":"acquire","target":"%s#held-b"}`, base)))
	var pidA int
	if err := conn.QueryRow(ctx, `SELECT backend_pid FROM hold_locks WHERE name = 'held-a'`).Scan(&pidA); err != nil {
		t.Fatalf("the session of held-a: %v", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, pidA); err != nil {
		t.Fatal(err)
	}
	if ev := c.event("lost"); fmt.Sprint(ev["lock"]) != fmt.Sprint(a["lock"]) {
		t.Fatalf("lost event %v, want lock %v's", ev, a["lock"])
	}
	wantOK(t, c.request(fmt.Sprintf(`{"id":"bc","op":"check","lock":%v}`, b["lock"])))
	n := wantOK(t, c.request(fmt.Sprintf(`{"id":"n","op":"acquire","target":"%s#held-n"}`, base)))
	wantOK(t, c.request(fmt.Sprintf(`{"id":"nc","op":"check","lock":%v}`, n["lock"])))
	c.in.Close()
	if code := c.waitExit(); code != 0 {
		t.Fatalf("agent exit status %d", code)
	}
	if pids := holders(); len(pids) != 0 {
		t.Fatalf("advisory locks left after the agent ended: %v", pids)
	}
}
