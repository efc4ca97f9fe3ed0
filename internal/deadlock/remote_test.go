package deadlock

import (
	"testing"

	"github.com/hold-dev/hold/lock"
)

// TestServerCycleRules: the chain through a server's waits
// (serverCycle) is followed only where every blocker is kept by one
// wait; the real processes are in the etcd and PostgreSQL tests.
func TestServerCycleRules(t *testing.T) {
	wait := func(id, path string, order int64, blockers, holds []string) lock.ServerWait {
		return lock.ServerWait{ID: id, Path: path, Order: order, Blockers: blockers, Holds: holds,
			Waiter: lock.Owner{PID: int(order)}}
	}
	for _, c := range []struct {
		name string
		ws   []lock.ServerWait
		want []string // the cycle's IDs from "me", nil for none
	}{
		{"two waits", []lock.ServerWait{
			wait("me", "b", 2, []string{"kb"}, []string{"ka"}),
			wait("x", "a", 1, []string{"ka"}, []string{"kb"}),
		}, []string{"me", "x"}},
		{"three waits", []lock.ServerWait{
			wait("me", "b", 3, []string{"kb"}, []string{"ka"}),
			wait("x", "c", 1, []string{"kc"}, []string{"kb"}),
			wait("y", "a", 2, []string{"ka"}, []string{"kc"}),
		}, []string{"me", "x", "y"}},
		{"a blocker no wait keeps", []lock.ServerWait{
			wait("me", "b", 2, []string{"kb", "kb2"}, []string{"ka"}),
			wait("x", "a", 1, []string{"ka"}, []string{"kb"}),
		}, nil},
		{"blockers kept by two waits", []lock.ServerWait{
			wait("me", "b", 3, []string{"kb"}, []string{"ka"}),
			wait("x", "a", 1, []string{"ka"}, []string{"kb"}),
			wait("y", "c", 2, []string{"kc"}, []string{"kb"}),
		}, nil},
		{"a cycle not through this wait", []lock.ServerWait{
			wait("me", "b", 3, []string{"kb"}, nil),
			wait("x", "a", 1, []string{"ka"}, []string{"kb"}),
			wait("y", "c", 2, []string{"kc"}, []string{"ka"}),
			wait("z", "d", 2, []string{"kd"}, []string{"kc"}),
		}, nil},
		{"its own lock", []lock.ServerWait{
			wait("me", "b", 2, []string{"kb"}, []string{"kb"}),
			wait("x", "a", 1, []string{"ka"}, nil),
		}, nil},
		{"no blockers", []lock.ServerWait{
			wait("me", "b", 2, nil, []string{"ka"}),
			wait("x", "a", 1, []string{"ka"}, nil),
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cyc := serverCycle(c.ws, "me")
			var got []string
			for _, s := range cyc {
				got = append(got, s.e.Name)
			}
			if len(got) != len(c.want) {
				t.Fatalf("cycle %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("cycle %v, want %v", got, c.want)
				}
			}
			if cyc != nil && youngest(cyc) != "me" {
				t.Errorf("youngest of %v is %s, want me (the greatest Order)", got, youngest(cyc))
			}
		})
	}
}
