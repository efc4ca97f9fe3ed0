//go:build unix

package dirlock

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/lock"
)

// A heartbeat stamped far in the future (a holder's clock, or a file
// server's, a day ahead) cannot be aged: the lock would look fresh for a
// day. Acquisition says it is clock skew, with what to do, instead of
// waiting; Describe says "in the future", not "-23h59m59s old".
func TestHeartbeatInTheFutureIsClockSkew(t *testing.T) {
	path := lockIn(t)
	stamp(t, path, lock.Owner{PID: 1, Host: "elsewhere.invalid", ID: "x", StartedAt: time.Now()})
	ahead := time.Now().Add(24 * time.Hour)
	if err := os.Chtimes(path, ahead, ahead); err != nil {
		t.Fatal(err)
	}
	p := New(Config{Stale: 2 * time.Second, Grace: time.Second})

	if why := p.Describe(path); !strings.Contains(why, "in the future") || !strings.Contains(why, "clock skew") || strings.Contains(why, "-23h") {
		t.Errorf("Describe: %q", why)
	}
	if _, err := p.TryAcquire(request(path)); err == nil || errors.Is(err, lock.ErrBusy) || !strings.Contains(err.Error(), "clock skew") {
		t.Errorf("TryAcquire of a lock stamped a day ahead: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := p.Acquire(ctx, request(path))
	if ctx.Err() != nil || err == nil || !strings.Contains(err.Error(), "hold break --force") {
		t.Errorf("Acquire of a lock stamped a day ahead waited or did not say what to do: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the skewed lock was removed: %v", err)
	}

	// A small skew, within the stale time, is an ordinary live lock, but
	// still reads as being in the future.
	soon := time.Now().Add(500 * time.Millisecond)
	os.Chtimes(path, soon, soon)
	if why := p.Describe(path); !strings.Contains(why, "in the future") || strings.Contains(why, "clock skew") {
		t.Errorf("Describe of a heartbeat 0.5s ahead: %q", why)
	}
	mustBusy(t, p, path)
}
