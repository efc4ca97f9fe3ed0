//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
)

// The semaphore rows (-slots): worker processes of this executable take a
// semaphore of 4 slots, or a lock, again and again, holding it for
// slotHold each time; the table gives hand-offs per second (acquisitions
// over the whole run's time) and the 99th percentile of the wait for a
// slot. Every implementation runs in the same invocation, round by round,
// so that a busy machine weighs on all of them alike.

// slotHold is how long a worker holds a slot: long enough that 4 slots
// are busy with 16 workers, short enough for many hand-offs.
const slotHold = 200 * time.Microsecond

// A slotImpl is one way of taking one of n slots (n 1: a lock).
type slotImpl struct {
	name, about string
	slots       int
	// take returns a release function once a slot is held.
	take func(target string) (release func(), err error)
}

// slotImpls lists the rows in table order.
func slotImpls() []slotImpl {
	ctx := context.Background()
	holdTake := func(opts ...hold.Option) func(string) (func(), error) {
		return func(target string) (func(), error) {
			l, err := hold.Acquire(ctx, target, opts...)
			if err != nil {
				return nil, err
			}
			return func() { l.Release() }, nil
		}
	}
	four, ok := slotsOption(4)
	if !ok {
		return nil // a baseline build (newapi.go)
	}
	one, _ := slotsOption(1)
	return []slotImpl{
		{name: "hold --slots 4", about: "hold.Acquire with hold.Slots(4): the queue, then the first free slot", slots: 4, take: holdTake(four)},
		{name: "4 flock(2) files, random", about: "open one of 4 slot files at random and block in flock(LOCK_EX) on it, as shell semaphore libraries do", slots: 4, take: randomSlotTake},
		{name: "hold", about: "hold.Acquire, the plain lock (1 holder)", slots: 1, take: holdTake()},
		{name: "hold --slots 1", about: "hold.Acquire with hold.Slots(1), which is the plain lock", slots: 1, take: holdTake(one)},
	}
}

// randomSlotTake is the hand-written semaphore: a slot file picked at
// random, and a blocking flock(2) on it, whether or not another is free.
func randomSlotTake(target string) (func(), error) {
	path := fmt.Sprintf("%s.lock.slot%d", target, rand.IntN(4))
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return nil, err
	}
	for {
		if err = unix.Flock(fd, unix.LOCK_EX); err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return func() { unix.Flock(fd, unix.LOCK_UN); unix.Close(fd) }, nil
}

// slotWorkerMain is one worker: m acquisitions of the named row on
// target, each held for slotHold; it prints each wait in nanoseconds, then
// "span FIRST LAST": when it first asked and when it last let go, in Unix
// nanoseconds, so that the run's time leaves out the processes' start.
func slotWorkerMain(name, target string, m int) int {
	var im *slotImpl
	for _, s := range slotImpls() {
		if s.name == name {
			im = &s
		}
	}
	if im == nil {
		fmt.Fprintln(os.Stderr, "bench: no semaphore row", name)
		return 2
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	var first, last time.Time
	for i := range m {
		start := time.Now()
		if i == 0 {
			first = start
		}
		release, err := im.take(target)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		waited := time.Since(start)
		time.Sleep(slotHold)
		release()
		last = time.Now()
		fmt.Fprintln(w, waited.Nanoseconds())
	}
	fmt.Fprintln(w, "span", first.UnixNano(), last.UnixNano())
	return 0
}

// slotRun is what one run of one row measured.
type slotRun struct {
	acquisitions int
	elapsed      time.Duration
	waits        []time.Duration
}

// runSlots runs one row with workers processes of m acquisitions each.
func runSlots(self string, im slotImpl, workers, m int) (*slotRun, error) {
	dir, err := os.MkdirTemp("", "hold-bench-slots-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "resource")
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range workers {
		cmd := exec.Command(self, "-slotworker", im.name, "-rundir", target, "-m", strconv.Itoa(m))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			return nil, fmt.Errorf("%s worker: %w", im.name, err)
		}
	}
	r := &slotRun{}
	var first, last int64
	for _, out := range outs {
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if span, ok := strings.CutPrefix(line, "span "); ok {
				a, b, _ := strings.Cut(span, " ")
				f, _ := strconv.ParseInt(a, 10, 64)
				l, _ := strconv.ParseInt(b, 10, 64)
				if first == 0 || f < first {
					first = f
				}
				last = max(last, l)
				continue
			}
			n, _ := strconv.ParseInt(line, 10, 64)
			r.waits = append(r.waits, time.Duration(n))
		}
	}
	// From the first request to the last release: the workers' start is
	// not the semaphore's cost.
	r.elapsed = time.Duration(last - first)
	r.acquisitions = len(r.waits)
	return r, nil
}

// fourthSlot holds 3 of 4 slots of a semaphore and times n acquisitions
// (and releases) of the fourth.
func fourthSlot(n int) ([]time.Duration, error) {
	dir, err := os.MkdirTemp("", "hold-bench-fourth-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "resource")
	ctx := context.Background()
	four, ok := slotsOption(4)
	if !ok {
		return nil, fmt.Errorf("the hold this suite was built against has no hold.Slots")
	}
	for range 3 {
		l, err := hold.Acquire(ctx, target, four)
		if err != nil {
			return nil, err
		}
		defer l.Release()
	}
	var took []time.Duration
	for range n {
		start := time.Now()
		l, err := hold.Acquire(ctx, target, four)
		if err != nil {
			return nil, err
		}
		took = append(took, time.Since(start))
		l.Release()
	}
	return took, nil
}

// slotsMain runs every row for rounds rounds, taking turns, and writes
// slots.md in out.
func slotsMain(self, out string, workers, m, rounds int) error {
	list := slotImpls()
	if len(list) == 0 {
		return fmt.Errorf("this build of the suite has no semaphore rows: the hold it was built against has no hold.Slots")
	}
	runs := make([][]*slotRun, len(list))
	for round := range rounds {
		for i, im := range list {
			r, err := runSlots(self, im, workers, m)
			if err != nil {
				return err
			}
			runs[i] = append(runs[i], r)
			fmt.Fprintf(os.Stderr, "round %d %-26s %8.0f hand-offs/s\n", round+1, im.name, float64(r.acquisitions)/r.elapsed.Seconds())
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Semaphores: %d workers, %d slots\n\n", workers, 4)
	fmt.Fprintf(&b, "`go run . -slots` (bench/): %d worker processes, %d acquisitions each, each held %v; hand-offs/s is acquisitions over the time from the first request to the last release; median of %d rounds, the rows taking turns. Load average at the start: %s.\n\n",
		workers, m, slotHold, rounds, loadAverage())
	b.WriteString("| implementation | slots | hand-offs/s | p99 wait | what it is |\n| --- | --- | --- | --- | --- |\n")
	rates := map[string]float64{}
	for i, im := range list {
		var perSec []float64
		var waits []time.Duration
		for _, r := range runs[i] {
			perSec = append(perSec, float64(r.acquisitions)/r.elapsed.Seconds())
			waits = append(waits, r.waits...)
		}
		slices.Sort(perSec)
		slices.Sort(waits)
		rate := perSec[len(perSec)/2]
		rates[im.name] = rate
		p99 := waits[len(waits)*99/100]
		fmt.Fprintf(&b, "| %s | %d | %.0f | %v | %s |\n", im.name, im.slots, rate, p99.Round(time.Microsecond), im.about)
	}
	fourth, err := fourthSlot(50)
	if err != nil {
		return err
	}
	slices.Sort(fourth)
	fmt.Fprintf(&b, "\nWith 3 of 4 slots held, a new hold.Acquire(Slots(4)) got the fourth in %v (median of %d; slowest %v).\n",
		fourth[len(fourth)/2].Round(time.Microsecond), len(fourth), fourth[len(fourth)-1].Round(time.Microsecond))
	if plain, one := rates["hold"], rates["hold --slots 1"]; plain > 0 {
		fmt.Fprintf(&b, "\n`--slots 1` against the plain lock: %.1f%% of its hand-offs/s.\n", 100*one/plain)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "slots.md"), []byte(b.String()), 0o644)
}
