package resched

import (
	"testing"
	"time"
)

// TestYieldGate: the gate lets one caller through, then none until
// yieldEvery has passed since the one it let through.
func TestYieldGate(t *testing.T) {
	var g yieldGate
	start := 10 * yieldEvery
	if !g.due(start) {
		t.Fatal("first call: not let through")
	}
	for _, at := range []time.Duration{start, start + yieldEvery/2, start + yieldEvery - 1} {
		if g.due(at) {
			t.Fatalf("let through again %v after the last", at-start)
		}
	}
	if !g.due(start + yieldEvery) {
		t.Fatal("not let through yieldEvery after the last")
	}
	if g.due(start + yieldEvery + 1) {
		t.Fatal("let through twice in a row")
	}
}

// TestAfterCycleLooksEvery: AfterCycle looks at the gate only every
// cycleEvery-th call, and passes there when the gate is due.
func TestAfterCycleLooksEvery(t *testing.T) {
	// No wait yet: the first cycles may pass.
	cycles.Store(0)
	lastWait.Store(0)
	// Due: the last pass long before any time since epoch.
	processYield.last.Store(int64(-time.Hour))
	before := Passes()
	for range cycleEvery - 1 {
		AfterCycle()
	}
	if got := Passes() - before; got != 0 {
		t.Fatalf("%d passes after %d cycles, want none before the %dth", got, cycleEvery-1, cycleEvery)
	}
	AfterCycle()
	if got := Passes() - before; got != 1 {
		t.Fatalf("%d passes after %d cycles with the gate due, want 1", got, cycleEvery)
	}
}

// TestAfterWaitQuiets: no pass for quietCycles cycles after a wait, the
// cycles quick and the gate due; then a pass.
func TestAfterWaitQuiets(t *testing.T) {
	cycles.Store(0)
	AfterWait()
	before := Passes()
	for range quietCycles - cycleEvery {
		processYield.last.Store(int64(-time.Hour))
		AfterCycle()
	}
	if got := Passes() - before; got != 0 {
		t.Fatalf("%d passes within %d cycles of a wait, want none", got, quietCycles)
	}
	for range 2 * cycleEvery {
		processYield.last.Store(int64(-time.Hour))
		AfterCycle()
	}
	if got := Passes() - before; got == 0 {
		t.Fatalf("no pass %d cycles after a wait", quietCycles+cycleEvery)
	}
}
