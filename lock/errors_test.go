package lock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestHeld(t *testing.T) {
	var o *Owner
	if o.Held(time.Now()) != 0 {
		t.Fatal("nil owner held for a while")
	}
	now := time.Now()
	o = &Owner{StartedAt: now.Add(-3 * time.Second)}
	if d := o.Held(now); d != 3*time.Second {
		t.Fatalf("Held = %v", d)
	}
	if d := (&Owner{StartedAt: now.Add(time.Hour)}).Held(now); d != 0 {
		t.Fatalf("a start in the future gives %v", d)
	}
}

func TestErrorMatchesAndNamesHolder(t *testing.T) {
	h := &Holder{Owner: &Owner{PID: 4242, Host: "a1", Command: []string{"hold", "run", "data/pipeline.md", "--", "make"}}, Alive: Alive}
	h.Owner.StartedAt = time.Now().Add(-12 * time.Second)
	var err error = &Error{Op: "acquire", Path: "data/pipeline.md.lock", Err: ErrBusy, Holder: h, Hint: "try later"}
	wrapped := fmt.Errorf("deploy: %w", err)
	if !errors.Is(wrapped, ErrBusy) || errors.Is(wrapped, ErrTimeout) {
		t.Fatal("errors.Is")
	}
	var e *Error
	if !errors.As(wrapped, &e) || e.Holder.Owner.PID != 4242 {
		t.Fatal("errors.As")
	}
	msg := err.Error()
	for _, want := range []string{"acquire data/pipeline.md.lock", "lock is busy", "pid 4242", "(hold run data/pipeline.md", "on host a1", "for 12", "alive", "(try later)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}

	// A holder the kernel reports that the record does not name.
	h = &Holder{Owner: &Owner{PID: 1}, PIDs: []int{77, 78}, Commands: map[int]string{77: "flock x sleep 9"}}
	if s := h.String(); !strings.Contains(s, "pid 77, 78 (flock x sleep 9)") || !strings.Contains(s, "recorded owner pid 1") {
		t.Errorf("holder from /proc/locks: %q", s)
	}
	if s := (*Holder)(nil).String(); s != "an unknown holder" {
		t.Errorf("nil holder: %q", s)
	}
	if s := (&Holder{}).String(); !strings.Contains(s, "no owner record") {
		t.Errorf("empty holder: %q", s)
	}
	e = &Error{Op: "open", Path: "p", Err: os.ErrNotExist}
	if !errors.Is(e, os.ErrNotExist) || e.Error() != "open p: file does not exist" {
		t.Errorf("%v", e)
	}
}

func TestWaitError(t *testing.T) {
	err := WaitError(context.DeadlineExceeded)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("deadline: %v", err)
	}
	err = WaitError(context.Canceled)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("cancel: %v", err)
	}
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if err := WaitError(ctx.Err()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel with cause: %v", err)
	}
}

func TestStrings(t *testing.T) {
	for s, want := range map[fmt.Stringer]string{Free: "free", HeldExclusive: "held exclusive", HeldShared: "held shared", Stale: "stale",
		Alive: "alive", Dead: "dead", LivenessUnknown: "unknown"} {
		if s.String() != want {
			t.Errorf("%v != %s", s, want)
		}
	}
}

// TestHolderCommandOnOneLine: a multi-line command line (hold run -c 'a
// newline b') is shown on the one line of a busy message, its line
// breaks and tabs written as \n, \r and \t (issue 59).
func TestHolderCommandOnOneLine(t *testing.T) {
	for _, h := range []*Holder{
		{Owner: &Owner{PID: 7, Command: []string{"sh", "-c", "echo a\n\tb\r"}}},
		{Owner: &Owner{PID: 7}, Commands: map[int]string{7: "sh -c echo a\n\tb\r"}},
		{PIDs: []int{8}, Commands: map[int]string{8: "sh -c echo a\n\tb\r"}},
	} {
		got := h.String()
		if strings.ContainsAny(got, "\n\r\t") || !strings.Contains(got, `echo a\n\tb\r`) {
			t.Errorf("holder %+v: %q, want the command on one line", h, got)
		}
	}
}
