//go:build unix

package dirlock

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/lock"
)

// The benchmarks put the portable protocol beside the kernel one in the
// same run (the machine is shared and noisy: only ratios within one run
// mean much).
//
//	go test -run '^$' -bench . -benchtime 20000x ./internal/dirlock/
//
// Uncontended: one acquire+release in a loop. Handoff: N processes loop on
// one lock around a tiny critical section (read a state file, write it
// back) until the count reaches b.N; a hand-off is an acquisition by a
// different process than the previous holder, and its latency runs from
// the moment the previous holder stamped its release time (just before
// releasing) to the moment the next holder had the lock, on the shared
// monotonic clock.

func protocols() []struct {
	name string
	p    func() lock.Protocol
} {
	return []struct {
		name string
		p    func() lock.Protocol
	}{
		{"dir", func() lock.Protocol { return New(Config{}) }},
		{"flock", func() lock.Protocol { return flock.Protocol{} }},
	}
}

func BenchmarkUncontended(b *testing.B) {
	for _, pr := range protocols() {
		b.Run(pr.name, func(b *testing.B) {
			p := pr.p()
			path := filepath.Join(benchDir(b), "x.lock")
			req := request(path)
			ctx := context.Background()
			for b.Loop() {
				h, err := p.Acquire(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUncontendedSlots: one acquire+release of a semaphore's slot
// in a loop, beside the plain lock. A request for one slot is the plain
// lock itself; one for more pays for the semaphore's looks for other
// counts and its token.
func BenchmarkUncontendedSlots(b *testing.B) {
	for _, n := range []int{0, 1, 4} {
		b.Run(fmt.Sprintf("slots=%d", n), func(b *testing.B) {
			p := New(Config{})
			req := request(filepath.Join(benchDir(b), "x.lock"))
			req.Slots = n
			ctx := context.Background()
			for b.Loop() {
				h, err := p.AcquireSlot(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Release(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkHandoff(b *testing.B) {
	for _, pr := range protocols() {
		for _, n := range []int{8, 30} {
			b.Run(fmt.Sprintf("%s/procs=%d", pr.name, n), func(b *testing.B) {
				benchHandoff(b, pr.name, n)
			})
		}
	}
}

// benchDir is where the benchmarks put their locks: HOLD_BENCH_DIR when
// set (to compare filesystems: directory creation costs far more on a disk
// than on tmpfs), a fresh temporary directory otherwise.
func benchDir(b *testing.B) string {
	if d := os.Getenv("HOLD_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "hold-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

func benchHandoff(b *testing.B, proto string, n int) {
	dir := benchDir(b)
	target := filepath.Join(dir, "state")
	var ws []*worker
	for range n {
		w := startWorker(b, "bench", envTarget+"="+target, envIters+"="+strconv.Itoa(b.N), envProto+"="+proto)
		ws = append(ws, w)
	}
	for _, w := range ws {
		w.expect(b, "ready")
	}
	b.ResetTimer()
	t0 := time.Now()
	for _, w := range ws {
		fmt.Fprintln(w.stdin, "go")
	}
	for _, w := range ws {
		if err := w.wait(b); err != nil {
			b.Fatalf("bench worker: %v\n%s", err, w.stderr)
		}
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	var lat []int64
	acq := 0
	for _, w := range ws {
		f, err := os.Open(fmt.Sprintf("%s.res.%d", target, w.cmd.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan()
		k, _ := strconv.Atoi(sc.Text())
		acq += k
		for sc.Scan() {
			v, _ := strconv.ParseInt(sc.Text(), 10, 64)
			lat = append(lat, v)
		}
		f.Close()
	}
	if acq != b.N {
		b.Fatalf("%d acquisitions counted, want %d", acq, b.N)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(acq)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "handoffs/s")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2])/1e3, "median-handoff-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-handoff-µs")
	}
}

// mono is CLOCK_MONOTONIC in nanoseconds: one clock for all processes on
// the machine (time.Now's monotonic reading is relative to each process).
func mono() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// workerBench is one process of BenchmarkHandoff.
func workerBench(target string) int {
	total, _ := strconv.Atoi(os.Getenv(envIters))
	var p lock.Protocol = New(Config{})
	if os.Getenv(envProto) == "flock" {
		p = flock.Protocol{}
	}
	me := os.Getpid()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 2
	}
	var lat []int64
	acq := 0
	ctx := context.Background()
	for {
		h, err := p.Acquire(ctx, request(target+".lock"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		got := mono()
		count, last, releasedAt := readState(target)
		if count >= total {
			h.Release()
			break
		}
		if last != 0 && last != me {
			lat = append(lat, got-releasedAt)
		}
		acq++
		os.WriteFile(target, fmt.Appendf(nil, "%d %d %d", count+1, me, mono()), 0o644)
		if err := h.Release(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
	}
	var sb strings.Builder
	fmt.Fprintln(&sb, acq)
	for _, v := range lat {
		fmt.Fprintln(&sb, v)
	}
	os.WriteFile(fmt.Sprintf("%s.res.%d", target, me), []byte(sb.String()), 0o644)
	return 0
}

func readState(target string) (count, last int, at int64) {
	b, err := os.ReadFile(target)
	if err != nil {
		return 0, 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, 0, 0
	}
	count, _ = strconv.Atoi(f[0])
	last, _ = strconv.Atoi(f[1])
	at, _ = strconv.ParseInt(f[2], 10, 64)
	return count, last, at
}
