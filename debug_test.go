package hold_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hold-dev/hold"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLoggerReportsReleaseAndLoss(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	target := filepath.Join(t.TempDir(), "t")

	l, err := hold.Acquire(context.Background(), target, hold.Logger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if l.File() == nil {
		t.Error("Lock.File is nil under a Logger: the wrapper hides the kernel lock's file")
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l.Release()
	if got := strings.Count(buf.String(), `msg="hold: released"`); got != 1 {
		t.Errorf("two Releases logged %d released events, want 1:\n%s", got, buf.String())
	}

	// A lock whose file is replaced while held is lost: Check says so,
	// and so does the log, once.
	l, err = hold.Acquire(context.Background(), target, hold.Logger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(target+".lock", target+".old"); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Check after the lock file was moved away: %v, want ErrLost", err)
	}
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Release of a lost lock: %v, want ErrLost", err)
	}
	out := buf.String()
	if strings.Count(out, `msg="hold: lost"`) != 1 || strings.Count(out, `msg="hold: released"`) != 1 {
		t.Errorf("want one lost event and no second released event:\n%s", out)
	}
}
