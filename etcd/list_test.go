package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

func TestListGroupsKeysByLock(t *testing.T) {
	p := dial(t)
	prefix := uniqueKey(t)
	ctx := context.Background()
	var held []*hold.Lock
	for _, key := range []string{prefix + "/b", prefix + "/a/nested"} {
		l, err := hold.Acquire(ctx, "", lockOpts(p, key)...)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	// A waiter on prefix/b: a second key under it.
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := hold.Acquire(wctx, "", lockOpts(p, prefix+"/b")...)
		waited <- err
	}()
	type row struct {
		path    string
		state   hold.State
		fence   uint64
		waiters int
	}
	list := func() []row {
		var rows []row
		if err := p.List(ctx, prefix, func(st *hold.Status, waiters int) {
			rows = append(rows, row{st.Path, st.State, st.Fence, waiters})
		}); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows := list()
		if len(rows) == 2 && rows[1].waiters == 1 {
			want := []row{{prefix + "/a/nested", hold.HeldExclusive, held[1].Token(), 0}, {prefix + "/b", hold.HeldExclusive, held[0].Token(), 1}}
			if rows[0] != want[0] || rows[1] != want[1] {
				t.Fatalf("List = %+v, want %+v", rows, want)
			}
			break
		}
		select {
		case err := <-waited:
			t.Fatalf("the waiter ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("List never showed the waiter: %+v", rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-waited
	for _, l := range held {
		l.Release()
	}
	if rows := list(); len(rows) != 0 {
		t.Fatalf("List after every holder left: %+v", rows)
	}
	if err := p.List(ctx, "", func(*hold.Status, int) {}); err == nil {
		t.Fatal("List of an empty prefix: no error")
	}
}
