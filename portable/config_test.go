package portable

import (
	"testing"
	"time"
)

// Each option sets its own knob: the values differ, so an option that set
// another knob, or none, would show. Heartbeat and Grace are chosen within
// the clamps Resolve applies (Heartbeat ≤ StaleAfter/2, Grace ≤ StaleAfter).
func TestOptionsSetTheirKnobs(t *testing.T) {
	p := New(StaleAfter(40*time.Second), Heartbeat(3*time.Second), Grace(2*time.Second),
		Patience(5*time.Second), Ceiling(7*time.Second), MaxPoll(30*time.Millisecond))
	c := p.dl.Config()
	for _, k := range []struct {
		name      string
		got, want time.Duration
	}{
		{"StaleAfter", c.Stale, 40 * time.Second},
		{"Heartbeat", c.Heartbeat, 3 * time.Second},
		{"Grace", c.Grace, 2 * time.Second},
		{"Patience", c.Patience, 5 * time.Second},
		{"Ceiling", c.Ceiling, 7 * time.Second},
		{"MaxPoll", c.MaxPoll, 30 * time.Millisecond},
	} {
		if k.got != k.want {
			t.Errorf("%s: the protocol has %v, want %v", k.name, k.got, k.want)
		}
	}
}

// A zero or negative duration, and a nil option, leave the default (or
// environment) value in place.
func TestUnsetOptionsLeaveDefaults(t *testing.T) {
	want := New().dl.Config()
	got := New(StaleAfter(0), Heartbeat(-time.Second), Grace(0), Patience(-1), Ceiling(0), MaxPoll(0), nil).dl.Config()
	if got != want {
		t.Fatalf("unset options changed the knobs: %+v, want %+v", got, want)
	}
}
