package hold

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// TestAfterLostKernelLock: the function AfterLost registers runs once the
// library's watch finds the lock file removed, a wrapped handle (a
// logger) included, and a stopped one never runs.
func TestAfterLostKernelLock(t *testing.T) {
	testenv.SkipUnderWine(t, "a removed file that is still open keeps its name until its last handle closes, as before Windows 10")
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"plain", nil},
		{"logged", []Option{Logger(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Acquire(context.Background(), filepath.Join(dir, "t"), c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan struct{})
			l.AfterLost(func() { close(ran) })
			stop := l.AfterLost(func() { t.Error("a stopped function ran") })
			if !stop() {
				t.Error("stop of a pending function reported it not stopped")
			}
			if err := os.Remove(l.Path()); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ran:
			case <-time.After(30 * time.Second): // a hang bound only
				t.Fatal("the loss was not noticed")
			}
			if err := l.Release(); !errors.Is(err, ErrLost) {
				t.Errorf("Release = %v; want ErrLost", err)
			}
		})
	}
}

// TestAfterLostOtherHandles: for a handle that only offers Lost, AfterLost
// runs the function once the channel closes, and not after stop.
func TestAfterLostOtherHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t")
	p := &channelProtocol{lost: make(chan struct{})}
	l, err := Acquire(context.Background(), path, WithProtocol(p))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	ran := make(chan struct{})
	l.AfterLost(func() { close(ran) })
	stopped := make(chan struct{})
	stop := l.AfterLost(func() { close(stopped) })
	if !stop() || stop() {
		t.Error("stop did not report stopping a pending function exactly once")
	}
	close(p.lost)
	select {
	case <-ran:
	case <-time.After(30 * time.Second): // a hang bound only
		t.Fatal("the function did not run when Lost closed")
	}
	select {
	case <-stopped:
		t.Error("a stopped function ran")
	default:
	}
}

// channelProtocol is the kernel lock with a Lost channel of the test's,
// and no lock.LostNotifier.
type channelProtocol struct {
	flock.Protocol
	lost chan struct{}
}

type channelHandle struct {
	lock.Handle
	lost chan struct{}
}

func (h channelHandle) Lost() <-chan struct{} { return h.lost }

func (p *channelProtocol) Acquire(ctx context.Context, req *Request) (Handle, error) {
	h, err := p.Protocol.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return channelHandle{h, p.lost}, nil
}
