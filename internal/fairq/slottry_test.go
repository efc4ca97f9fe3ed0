//go:build unix

package fairq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/lock"
)

// Environment of the slot roles.
const (
	slotsEnv = "FAIRQ_TEST_SLOTS"
	stopEnv  = "FAIRQ_TEST_STOP"
)

// kernelSemaphore names, beside the queue designs, the kernel semaphore
// without the fair protocol in front: its waiters queue in this package's
// queue too (see slots.go), and its looks are the ones the fair
// semaphore's are.
const kernelSemaphore = "kernel"

// semaphoreOf returns the semaphore under test: the fair protocol of a
// queue design, or the kernel semaphore itself.
func semaphoreOf(design string) lock.Semaphore {
	if design == kernelSemaphore {
		return flock.Protocol{}
	}
	return newProtocol(design)
}

// slotChurnRole takes a slot of the semaphore under test, holds it a moment,
// lets go, and pauses a moment, again and again until the stop file
// exists: its slot comes and goes, and between its holds there are
// instants with no slot held at all.
func slotChurnRole() int {
	path, stop := os.Getenv(lockEnv), os.Getenv(stopEnv)
	n, _ := strconv.Atoi(os.Getenv(slotsEnv))
	p := semaphoreOf(os.Getenv(designEnv))
	for !exists(stop) {
		req := request(path)
		req.Slots = n
		h, err := p.AcquireSlot(context.Background(), req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "acquire slot:", err)
			return 1
		}
		time.Sleep(time.Millisecond)
		if err := h.Release(); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			return 1
		}
		time.Sleep(time.Millisecond)
	}
	return 0
}

// slotLookRole looks at the semaphore as fast as it can, as hold status
// and hold.Inspect do, until the stop file exists.
func slotLookRole() int {
	path, stop := os.Getenv(lockEnv), os.Getenv(stopEnv)
	p := semaphoreOf(os.Getenv(designEnv))
	for !exists(stop) {
		if _, err := p.InspectSlots(path); err != nil {
			fmt.Fprintln(os.Stderr, "inspect slots:", err)
			return 1
		}
	}
	return 0
}

// exists tells whether the file at path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// A try of a fair semaphore (and of the kernel one) is busy only when
// every slot is held: with n-1 processes taking and letting go of slots
// and another looking at the semaphore all the time, every try takes a
// slot. It did not: a look that found no slot held tested the lock file
// itself with an exclusive lock, and a try that asked for its shared lock
// in that instant was told that the lock was held exclusively (which
// keeps every slot out), by an unknown holder or by the looker.
func TestSlotTryBusyOnlyWhenAllHeld(t *testing.T) {
	for _, d := range append(designs(), kernelSemaphore) {
		t.Run(d, func(t *testing.T) { testSlotTryBusyOnlyWhenAllHeld(t, d) })
	}
}

func testSlotTryBusyOnlyWhenAllHeld(t *testing.T, design string) {
	path := lockPath(t)
	stop := filepath.Join(t.TempDir(), "stop")
	const n = 3
	env := []string{lockEnv + "=" + path, stopEnv + "=" + stop, slotsEnv + "=" + strconv.Itoa(n), designEnv + "=" + design}
	var workers []func() error
	for range n - 1 {
		workers = append(workers, worker(t, "slotchurn", env...).Wait)
	}
	workers = append(workers, worker(t, "slotlook", env...).Wait)
	p := semaphoreOf(design)
	waitFor(t, "the workers made the semaphore", func() bool {
		st, err := p.InspectSlots(path)
		return err == nil && st.Slots == n
	})
	const tries = 2000
	busy := 0
	var first error
	for range tries {
		req := request(path)
		req.Slots = n
		h, err := p.TryAcquireSlot(req)
		if err != nil {
			if !errors.Is(err, lock.ErrBusy) {
				t.Fatal(err)
			}
			if busy++; first == nil {
				first = err
			}
			continue
		}
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
		// Let go for a moment: a try that holds a slot all the time
		// leaves no instant with no slot held.
		time.Sleep(100 * time.Microsecond)
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, wait := range workers {
		if err := wait(); err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	if busy > 0 {
		t.Errorf("a try was refused %d times of %d beside %d holders of %d slots; the first: %v", busy, tries, n-1, n, first)
	}
}

// frontEnv names the file the front role creates once it is at the
// front of the queue.
const frontEnv = "FAIRQ_TEST_FRONT"

// frontRole joins the queue a slot of the semaphore under test waits in,
// stays at its front a moment without making the semaphore, as its first
// holder does on its way in, and leaves.
func frontRole() int {
	path, design := os.Getenv(lockEnv), os.Getenv(designEnv)
	req := request(path)
	if design == kernelSemaphore {
		req.Path = flock.CountPath(path)
	}
	pl, err := front(context.Background(), req, true, design == ticketsDesign, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "front:", err)
		return 1
	}
	if err := os.WriteFile(os.Getenv(frontEnv), nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "front file:", err)
		return 1
	}
	time.Sleep(300 * time.Millisecond)
	pl.Leave()
	return 0
}

// A try that comes while the first holder of a semaphore is at the front
// of the queue, before it has made the semaphore, waits behind it and
// takes a slot: every slot is free. The fair semaphore's try was busy at
// once, as its look for a free slot took no semaphore for none free.
func TestSlotTryBehindFirstHolder(t *testing.T) {
	for _, d := range append(designs(), kernelSemaphore) {
		t.Run(d, func(t *testing.T) { testSlotTryBehindFirstHolder(t, d) })
	}
}

func testSlotTryBehindFirstHolder(t *testing.T, design string) {
	path := lockPath(t)
	atFront := filepath.Join(t.TempDir(), "front")
	w := worker(t, "front", lockEnv+"="+path, designEnv+"="+design, frontEnv+"="+atFront)
	waitFor(t, "the first holder is at the front of the queue", func() bool { return exists(atFront) })
	req := request(path)
	req.Slots = 3
	h, err := semaphoreOf(design).TryAcquireSlot(req)
	if err != nil {
		t.Errorf("a try behind the first holder of a semaphore not yet made: %v", err)
	} else if err := h.Release(); err != nil {
		t.Error(err)
	}
	if err := w.Wait(); err != nil {
		t.Errorf("front: %v", err)
	}
}
