//go:build unix

package hold_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/portable"
)

// TestFairComposes checks that Fair works with the other options in any
// order: the queue goes beside the lock path they choose, and a fair
// waiter queues there behind a plain holder, then gets the lock.
func TestFairComposes(t *testing.T) {
	dir := portable.New()
	for _, tc := range []struct {
		name  string
		proto hold.Protocol
		opts  func(lockFile string) []hold.Option
	}{
		{"fair first", flock.Protocol{}, func(lf string) []hold.Option {
			return []hold.Option{hold.Fair(), hold.LockFile(lf), hold.WithProtocol(flock.Protocol{})}
		}},
		{"fair last", flock.Protocol{}, func(lf string) []hold.Option {
			return []hold.Option{hold.WithProtocol(flock.Protocol{}), hold.LockFile(lf), hold.Field("job", "x"), hold.Fair()}
		}},
		{"fair portable", dir, func(lf string) []hold.Option {
			return []hold.Option{hold.Fair(), hold.LockFile(lf), hold.WithProtocol(dir), hold.Field("job", "x")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lf := filepath.Join(dir, "custom.lock")
			plain, err := hold.TryAcquire("", hold.LockFile(lf), hold.WithProtocol(tc.proto))
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan *hold.Lock, 1)
			errc := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				l, err := hold.Acquire(ctx, "", tc.opts(lf)...)
				if err != nil {
					errc <- err
					return
				}
				got <- l
			}()
			// The fair waiter shows up in the queue of that lock file.
			deadline := time.Now().Add(30 * time.Second)
			for {
				if n, err := fairq.Waiting(lf); err != nil {
					t.Fatal(err)
				} else if n == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("fair waiter never queued beside the lock file")
				}
				time.Sleep(2 * time.Millisecond)
			}
			select {
			case l := <-got:
				t.Fatalf("fair waiter got the lock while a plain holder had it (%s)", l.Path())
			case err := <-errc:
				t.Fatal(err)
			default:
			}
			if err := plain.Release(); err != nil {
				t.Fatal(err)
			}
			select {
			case l := <-got:
				if l.Path() != lf || l.Protocol() != tc.proto.Name() || (l.File() == nil) != (tc.proto.Name() != "flock") {
					t.Errorf("fair lock: path %q protocol %q file %v", l.Path(), l.Protocol(), l.File())
				}
				if l.Owner().Fields["job"] != "x" && tc.name != "fair first" {
					t.Errorf("owner fields lost: %v", l.Owner().Fields)
				}
				l.Release()
			case err := <-errc:
				t.Fatal(err)
			case <-time.After(30 * time.Second):
				t.Fatal("fair waiter did not get the released lock")
			}
		})
	}
}
