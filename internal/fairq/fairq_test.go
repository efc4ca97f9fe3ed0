//go:build unix

package fairq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/lock"
)

// TestFIFOOrder queues waiter processes one by one behind a held lock,
// each started only once the previous one has its ticket, and checks that
// they get the lock in that order. Each waiter then queues again the moment
// it releases, twice: a plain kernel lock would usually hand the lock
// straight back to it (barging), while in fair mode every acquisition must
// follow ticket order, whatever order the waiters rejoined in.
func TestFIFOOrder(t *testing.T) { forDesigns(t, testFIFOOrder) }

func testFIFOOrder(t *testing.T, design string) {
	const waiters, loops = 22, 3
	rounds := 3
	if design == ticketsDesign && runtime.GOOS == "linux" {
		rounds = 2 // the design Linux does not use by default: keep the suite short
	}
	for round := 0; round < rounds; round++ {
		path := lockPath(t)
		out := filepath.Join(filepath.Dir(path), "order")
		main := holdMain(t, path)
		var cmds []*exec.Cmd
		for i := 0; i < waiters; i++ {
			cmd := worker(t, "waiter", lockEnv+"="+path, idEnv+"="+strconv.Itoa(i), outEnv+"="+out,
				loopsEnv+"="+strconv.Itoa(loops), designEnv+"="+design)
			cmds = append(cmds, cmd)
			waitFor(t, "waiter "+strconv.Itoa(i)+" is queued", func() bool { return len(queued(t, design, path)) == i+1 })
		}
		if err := main.Release(); err != nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("round %d: waiter %d: %v", round, i, err)
			}
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != waiters*loops {
			t.Fatalf("round %d: %d acquisitions recorded, want %d", round, len(lines), waiters*loops)
		}
		var ids []string
		var last uint64
		for i, line := range lines {
			id, ticketStr, _ := strings.Cut(line, " ")
			ticket, err := strconv.ParseUint(ticketStr, 10, 64)
			if err != nil {
				t.Fatalf("round %d: bad record %q", round, line)
			}
			if ticket <= last {
				t.Fatalf("round %d: acquisition %d had ticket %d after ticket %d: not in queue order\n%s", round, i, ticket, last, b)
			}
			last = ticket
			if i < waiters {
				ids = append(ids, id)
			}
		}
		var want []string
		for i := 0; i < waiters; i++ {
			want = append(want, strconv.Itoa(i))
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("round %d: waiters queued one by one got the lock in order %v, want %v", round, ids, want)
		}
		if left := queued(t, design, path); len(left) != 0 {
			t.Fatalf("round %d: tickets left behind: %v", round, left)
		}
	}
}

// TestKilledWaiterDoesNotStall kills waiters in the middle of the queue and
// at its head (blocked on the main lock) and checks that the others still
// get the lock, in order, and that the dead tickets are cleaned up.
func TestKilledWaiterDoesNotStall(t *testing.T) { forDesigns(t, testKilledWaiterDoesNotStall) }

func testKilledWaiterDoesNotStall(t *testing.T, design string) {
	path := lockPath(t)
	out := filepath.Join(filepath.Dir(path), "order")
	main := holdMain(t, path)
	const n = 7
	victims := map[int]bool{0: true, 3: true, 4: true} // 0 is the head
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		cmd := worker(t, "waiter", lockEnv+"="+path, idEnv+"="+strconv.Itoa(i), outEnv+"="+out, designEnv+"="+design)
		cmds = append(cmds, cmd)
		waitFor(t, "waiter "+strconv.Itoa(i)+" is queued", func() bool { return len(queued(t, design, path)) == i+1 })
	}
	for i := range victims {
		if err := cmds[i].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmds[i].Wait()
	}
	if err := main.Release(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, cmd := range cmds {
		if victims[i] {
			continue
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
		want = append(want, strconv.Itoa(i))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		id, _, _ := strings.Cut(line, " ")
		got = append(got, id)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("survivors got the lock in order %v, want %v", got, want)
	}
	if left := queued(t, design, path); len(left) != 0 {
		t.Fatalf("dead tickets left behind: %v", left)
	}
}

// TestCancelledWaiterLeavesNoTicket cancels a waiter between two others
// and checks that it returns promptly, leaves no ticket, and that its
// successor still gets the lock after its predecessor.
func TestCancelledWaiterLeavesNoTicket(t *testing.T) {
	forDesigns(t, testCancelledWaiterLeavesNoTicket)
}

func testCancelledWaiterLeavesNoTicket(t *testing.T, design string) {
	for _, deadline := range []bool{false, true} {
		path := lockPath(t)
		main := holdMain(t, path)
		p := newProtocol(design)
		got := make(chan string, 3)
		start := func(name string, ctx context.Context) chan error {
			errc := make(chan error, 1)
			go func() {
				h, err := p.Acquire(ctx, request(path))
				if err == nil {
					got <- name
					err = h.Release()
				}
				errc <- err
			}()
			return errc
		}
		first := start("first", context.Background())
		waitFor(t, "first is queued", func() bool { return len(queued(t, design, path)) == 1 })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var end func() = cancel
		if deadline {
			d := &endable{Context: context.Background(), done: make(chan struct{})}
			ctx, end = d, d.expire
		}
		middle := start("middle", ctx)
		waitFor(t, "middle is queued", func() bool { return len(queued(t, design, path)) == 2 })
		middleTicket := queued(t, design, path)[1]
		last := start("last", context.Background())
		waitFor(t, "last is queued", func() bool { return len(queued(t, design, path)) == 3 })

		end()
		select {
		case err := <-middle:
			want := context.Canceled
			if deadline {
				want = lock.ErrTimeout
			}
			if !errors.Is(err, want) {
				t.Fatalf("cancelled waiter returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("cancelled waiter did not return")
		}
		if slices.Contains(queued(t, design, path), middleTicket) {
			t.Fatalf("cancelled waiter left its ticket %d behind", middleTicket)
		}
		if err := main.Release(); err != nil {
			t.Fatal(err)
		}
		for _, errc := range []chan error{first, last} {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
		if a, b := <-got, <-got; a != "first" || b != "last" {
			t.Fatalf("order %s, %s; want first, last", a, b)
		}
		if left := queued(t, design, path); len(left) != 0 {
			t.Fatalf("tickets left behind: %v", left)
		}
	}
}

// TestTimeoutAtHead: a waiter at the head of the queue waits on the main
// lock itself; its deadline must still end the wait and free the queue.
func TestTimeoutAtHead(t *testing.T) { forDesigns(t, testTimeoutAtHead) }

func testTimeoutAtHead(t *testing.T, design string) {
	path := lockPath(t)
	main := holdMain(t, path)
	defer main.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := newProtocol(design).Acquire(ctx, request(path))
	if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if left := queued(t, design, path); len(left) != 0 {
		t.Fatalf("tickets left behind: %v", left)
	}
}

// TestFairAndPlainExclude runs fair and plain waiter processes looping on
// one lock; a marker created with O_EXCL inside the critical section and a
// read-modify-write counter catch any two holders at once.
func TestFairAndPlainExclude(t *testing.T) { forDesigns(t, testFairAndPlainExclude) }

func testFairAndPlainExclude(t *testing.T, design string) {
	path := lockPath(t)
	dir := filepath.Dir(path)
	marker, counter := filepath.Join(dir, "inside"), filepath.Join(dir, "counter")
	if err := os.WriteFile(counter, []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	const perKind, loops = 3, 150
	var cmds []*exec.Cmd
	for i := 0; i < 2*perKind; i++ {
		fair := "0"
		if i%2 == 0 {
			fair = "1"
		}
		cmds = append(cmds, worker(t, "loop", lockEnv+"="+path, markerEnv+"="+marker,
			counterEnv+"="+counter, fairEnv+"="+fair, loopsEnv+"="+strconv.Itoa(loops), designEnv+"="+design))
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	b, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), strconv.Itoa(2*perKind*loops); got != want {
		t.Fatalf("counter is %s, want %s: updates were lost", got, want)
	}
	if left := queued(t, design, path); len(left) != 0 {
		t.Fatalf("tickets left behind: %v", left)
	}
}

// TestTryAcquire: TryAcquire succeeds on a free lock with an empty queue
// and reports busy, without queueing, when a fair waiter is ahead.
func TestTryAcquire(t *testing.T) { forDesigns(t, testTryAcquire) }

func testTryAcquire(t *testing.T, design string) {
	path := lockPath(t)
	p := newProtocol(design)
	h, err := p.TryAcquire(request(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.TryAcquire(request(path)); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("second TryAcquire: got %v, want ErrBusy", err)
	}
	// A fair waiter queues behind the holder; TryAcquire reports busy
	// because of the queue, without queueing itself.
	waiter := make(chan error, 1)
	go func() {
		h2, err := p.Acquire(context.Background(), request(path))
		if err == nil {
			time.Sleep(50 * time.Millisecond)
			err = h2.Release()
		}
		waiter <- err
	}()
	waitFor(t, "waiter is queued", func() bool { return len(queued(t, design, path)) == 1 })
	if n, err := Waiting(path); err != nil || n != 1 {
		t.Fatalf("Waiting = %d, %v; want 1", n, err)
	}
	if _, err := p.TryAcquire(request(path)); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("TryAcquire with a waiter queued: got %v, want ErrBusy", err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
	if n, err := Waiting(path); err != nil || n != 0 {
		t.Fatalf("Waiting after everyone left = %d, %v; want 0", n, err)
	}
	if left := queued(t, design, path); len(left) != 0 {
		t.Fatalf("tickets left behind: %v", left)
	}
}

// TestAbandonedTicketsAreSkipped (ticket files) simulates crashes: a ticket file created
// but never locked (a crash between creating and locking it), a gap in the
// numbers (a crash between writing the counter and creating the ticket),
// and an empty counter (a crash between creating it and its first write).
// A waiter must go straight past all of them and clean up.
func TestAbandonedTicketsAreSkipped(t *testing.T) {
	path := lockPath(t)
	q := path + QueueSuffix
	if err := os.Mkdir(q, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint64{3, 7} {
		if err := os.WriteFile(filepath.Join(q, ticketName(n)), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(q, counterName), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := newProtocol(ticketsDesign).Acquire(ctx, request(path))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if left := tickets(t, path); len(left) != 0 {
		t.Fatalf("abandoned tickets not cleaned: %v", left)
	}
	b, err := os.ReadFile(filepath.Join(q, counterName))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := parseTicket(strings.TrimSpace(string(b))); !ok || n != 8 {
		t.Fatalf("counter is %q, want ticket 8 (above every ticket found)", b)
	}
}

// TestForeignQueueDirectory (ticket files): a directory at the queue's
// path that is not a queue, or whose counter holds something else, is
// refused with ErrForeign, and nothing is created or written in it.
func TestForeignQueueDirectory(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"user's directory": {"notes.txt": "mine"},
		"foreign counter":  {counterName: "not a number"},
	} {
		path := lockPath(t)
		q := path + QueueSuffix
		if err := os.Mkdir(q, 0o777); err != nil {
			t.Fatal(err)
		}
		for f, c := range files {
			if err := os.WriteFile(filepath.Join(q, f), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := newProtocol(ticketsDesign).TryAcquire(request(path))
		if !errors.Is(err, lock.ErrForeign) {
			t.Fatalf("%s: got %v, want ErrForeign", name, err)
		}
		entries, _ := os.ReadDir(q)
		if len(entries) != len(files) {
			t.Fatalf("%s: the directory now holds %v", name, entries)
		}
		for f, c := range files {
			if b, _ := os.ReadFile(filepath.Join(q, f)); string(b) != c {
				t.Fatalf("%s: %s now holds %q", name, f, b)
			}
		}
	}
}

// TestQueueSymlinkRefused (ticket files): a symlink planted at the queue's path is not
// followed.
func TestQueueSymlinkRefused(t *testing.T) {
	path := lockPath(t)
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, path+QueueSuffix); err != nil {
		t.Fatal(err)
	}
	_, err := newProtocol(ticketsDesign).TryAcquire(request(path))
	if !errors.Is(err, lock.ErrNotRegular) {
		t.Fatalf("got %v, want ErrNotRegular", err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Fatalf("files created through the symlink: %v", entries)
	}
}

// endable is a context whose deadline passes when the test says so, so a
// waiter can be queued first and time out after.
type endable struct {
	context.Context
	done chan struct{}
}

func (c *endable) Done() <-chan struct{} { return c.done }
func (c *endable) expire()               { close(c.done) }
func (c *endable) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// forDesigns runs a test once per queue design.
func forDesigns(t *testing.T, test func(t *testing.T, design string)) {
	for _, d := range designs() {
		t.Run(d, func(t *testing.T) { test(t, d) })
	}
}

func TestTicketNames(t *testing.T) {
	for _, n := range []uint64{0, 1, 42, 1<<64 - 1} {
		if got, ok := parseTicket(ticketName(n)); !ok || got != n {
			t.Errorf("parseTicket(ticketName(%d)) = %d, %v", n, got, ok)
		}
	}
	for _, name := range []string{"counter", "", "0000000000000000000x", "000000000000000000001"} {
		if _, ok := parseTicket(name); ok {
			t.Errorf("parseTicket(%q) accepted", name)
		}
	}
}

// TestSharedHoldersTogether: shared fair waiters leave the queue as soon
// as they hold the lock, so several hold it together, and an exclusive fair
// waiter queued after them gets it once they are all gone.
func TestSharedHoldersTogether(t *testing.T) { forDesigns(t, testSharedHoldersTogether) }

func testSharedHoldersTogether(t *testing.T, design string) {
	path := lockPath(t)
	p := newProtocol(design)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shared := func() *lock.Request { r := request(path); r.Shared = true; return r }
	a, err := p.Acquire(ctx, shared())
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Acquire(ctx, shared())
	if err != nil {
		t.Fatalf("second shared holder: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		h, err := p.Acquire(ctx, request(path))
		if err == nil {
			err = h.Release()
		}
		got <- err
	}()
	waitFor(t, "exclusive waiter is queued", func() bool { return len(queued(t, design, path)) == 1 })
	a.Release()
	select {
	case err := <-got:
		t.Fatalf("exclusive waiter got the lock while a shared holder had it (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestTimeoutWhileJoining: a waiter blocked on the queue's counter (held
// here as a stopped process would hold it) still returns when its context
// ends, and leaves nothing queued.
func TestTimeoutWhileJoining(t *testing.T) { forDesigns(t, testTimeoutWhileJoining) }

func testTimeoutWhileJoining(t *testing.T, design string) {
	path := lockPath(t)
	p := newProtocol(design)
	// Create the queue, then take its counter lock.
	h, err := p.TryAcquire(request(path))
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	release := holdCounter(t, design, path)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = p.Acquire(ctx, request(path))
	if !errors.Is(err, lock.ErrTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the timed-out wait took %v", took)
	}
	release()
	if left := queued(t, design, path); len(left) != 0 {
		t.Fatalf("tickets left behind: %v", left)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	h, err = p.Acquire(ctx2, request(path))
	if err != nil {
		t.Fatalf("after the counter is free again: %v", err)
	}
	h.Release()
}

// TestFront: the queue alone, with no lock behind it, admits one waiter at
// a time, in arrival order. The one at the front keeps every later waiter
// back until it leaves; a waiter that will not wait is told busy while
// anyone is queued; and nothing is left queued at the end.
func TestFront(t *testing.T) { forDesigns(t, testFront) }

func testFront(t *testing.T, design string) {
	path := lockPath(t)
	tickets := design == ticketsDesign
	ctx := context.Background()
	first, err := front(ctx, request(path), true, tickets, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := front(ctx, request(path), false, tickets, nil); err != errQueued {
		t.Fatalf("front without waiting, behind the front: got %v, want errQueued", err)
	}
	if design == ofdDesign {
		// The exported form reports it as busy.
		if _, err := Front(ctx, request(path), false); !errors.Is(err, lock.ErrBusy) {
			t.Fatalf("Front without waiting: got %v, want ErrBusy", err)
		}
	}
	const waiters = 4
	var inside atomic.Int32
	order := make(chan int, waiters)
	errs := make(chan error, waiters)
	for i := 1; i <= waiters; i++ {
		go func() {
			pl, err := front(ctx, request(path), true, tickets, nil)
			if err != nil {
				errs <- err
				return
			}
			if n := inside.Add(1); n != 1 {
				errs <- fmt.Errorf("waiter %d at the front with %d others", i, n-1)
			}
			order <- i
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			pl.Leave()
			errs <- nil
		}()
		// Join one at a time, so that arrival order is known.
		waitFor(t, "waiter queued", func() bool { return len(queued(t, design, path)) == i+1 })
	}
	first.Leave()
	first.Leave() // idempotent
	for i := 1; i <= waiters; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if got := <-order; got != i {
			t.Fatalf("waiter %d reached the front in place %d", got, i)
		}
	}
	if left := queued(t, design, path); len(left) != 0 {
		t.Fatalf("tickets left behind: %v", left)
	}
}
