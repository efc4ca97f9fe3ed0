//go:build unix

// Command bench is hold's benchmark suite: N worker processes × M
// acquisitions of one lock around a tiny critical section (read and rewrite
// a fixed-width counter in place), for hold (plain, fair, portable) and,
// in the same run, raw flock(2), gofrs/flock, Go's lockedfile and flock(1).
//
// It reports hand-offs per second, lost updates (must be 0), and the
// distribution of wait and hold times per implementation, for N = 2, 8 and
// 30, writes the table to <out>/results.md and a chart of the wait
// distributions to <out>/waits.svg:
//
//	cd bench && go run . -o results          # full run, a few minutes
//	cd bench && go run . -quick -o /tmp/b    # a quick look
//	cd bench && go run . -baseline REV       # this tree against hold at git revision REV
//
// The suite is its own module so that its dependencies stay out of hold's.
package main

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	var (
		out      = flag.String("o", "results", "directory for results.md and waits.svg")
		quick    = flag.Bool("quick", false, "fewer acquisitions and a shorter time budget per run")
		ns       = flag.String("n", "2,8,30", "comma-separated worker counts")
		only     = flag.String("impl", "", "comma-separated implementations to run (default all)")
		total    = flag.Int("acquisitions", 0, "acquisitions per run, split among the workers (default 24000, -quick 3000)")
		budget   = flag.Duration("budget", 0, "time limit for one implementation's acquisitions at one worker count, over all rounds (default 6s, -quick 1.5s)")
		worker   = flag.String("worker", "", "internal: run as a worker of this implementation")
		runDir   = flag.String("rundir", "", "internal: the worker's run directory")
		base     = flag.String("dir", "", "make each run's lock and counter under this directory (default: the system's temporary directory), e.g. /dev/shm to compare tmpfs with a disk")
		modules  = flag.String("node-modules", "", "node_modules holding proper-lockfile 4.1.2 for the Node rows (default: $HOLD_BENCH_NODE_MODULES, else ../internal/dirlock/testdata/node/node_modules)")
		m        = flag.Int("m", 0, "internal: the worker's acquisitions")
		csTarget = flag.String("cs", "", "internal: run the critical section on this counter (the flock(1) child)")
		png      = flag.Bool("png", false, "also write the chart as waits.png")
		rounds   = flag.Int("rounds", 3, "rounds per worker count; the implementations take turns, round by round")
		echo     = flag.Bool("echo", false, "internal: echo stdin to stdout (the wake-up probe's far end)")
		listing  = flag.Bool("listing", false, "run only the `hold ls` / `hold status` rows against `ls -l` (writes listing.md)")
		holdExe  = flag.String("hold", "", "with -listing: the hold executable to time (default: built from the parent module)")
		holdF    = flag.Bool("holdfiles", false, "internal: flock the files named on stdin until stdin closes")
		baseRev  = flag.String("baseline", "", "compare with hold at this git revision: build the suite against it too and run the Go rows alternately from both builds (default 8 rounds), writing baseline.md")
		uncBatch = flag.Int("uncontended", 0, "internal: time this many uncontended acquisitions of each op, once")
		slotsRun = flag.Bool("slots", false, "run only the semaphore rows: 16 workers on 4 slots, hold against 4 flock(2) files picked at random, and --slots 1 against a plain lock (writes slots.md)")
		slotWork = flag.String("slotworker", "", "internal: run as a worker of this semaphore row")
	)
	flag.Parse()
	switch {
	case *echo:
		os.Exit(echoMain())
	case *uncBatch > 0:
		os.Exit(uncontendedMain(*uncBatch))
	case *holdF:
		os.Exit(holdFilesMain())
	case *listing:
		self, err := os.Executable()
		if err == nil {
			err = listingMain(self, *out, *holdExe, *quick)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case *slotWork != "":
		os.Exit(slotWorkerMain(*slotWork, *runDir, *m))
	case *slotsRun:
		self, err := os.Executable()
		if err == nil {
			each := 300
			if *quick {
				each = 60
			}
			if flagSet("m") {
				each = *m
			}
			err = slotsMain(self, *out, 16, each, *rounds)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case *csTarget != "":
		os.Exit(criticalSectionChild(*csTarget))
	case *worker != "":
		os.Exit(workerMain(*worker, *runDir, *m, *budget))
	}
	if *total == 0 {
		*total = 24000
		if *quick {
			*total = 3000
		}
	}
	if *budget == 0 {
		*budget = 6 * time.Second
		if *quick {
			*budget = 1500 * time.Millisecond
		}
	}
	if *baseRev != "" && !flagSet("rounds") {
		*rounds = 8
	}
	*rounds = max(*rounds, 1)
	var counts []int
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: bad worker count %q\n", s)
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	var list []impl
	for _, im := range impls() {
		if *only == "" || containsName(*only, im.name) {
			list = append(list, im)
		}
	}
	se := &suiteEnv{base: *base, modules: *modules}
	if *baseRev != "" {
		batch := 20000
		if *quick {
			batch = 2000
		}
		if err := runBaseline(se, *out, *baseRev, counts, *only, *total, *rounds, *budget, batch); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if err := runSuite(se, *out, counts, list, *total, *rounds, *budget, *quick, *png); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// flagSet reports whether the flag name was given.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func containsName(csv, name string) bool {
	for _, s := range strings.Split(csv, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

// cliAcquisitions is how many acquisitions a run of the flock(1) path makes
// in all: each is two process starts.
func cliAcquisitions(quick bool) int {
	if quick {
		return 30
	}
	return 90
}

// loadAverage is the 1-minute load average where the system tells it: on
// a machine shared with other work, the scheduler's wake-up latency, which
// every fair hand-off pays, depends on it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b) + " unknown")[0]
}

// result is one run: one implementation with N workers.
type result struct {
	n        int
	impl     impl
	acquired int
	elapsed  time.Duration
	lost     int64
	waits    []time.Duration
	holds    []time.Duration
	// handoffs are the acquisitions by another process than the previous
	// holder; handoffLat their latencies, from the previous holder
	// beginning its release to the next one holding the lock.
	handoffs   int
	handoffLat []time.Duration
	// cpu is the CPU time the workers that report it (the Python ones)
	// used over their measured cycles, with their agents'; agentCPU the
	// agents' part.
	cpu, agentCPU time.Duration
}

// add merges another round of the same implementation and worker count.
func (r *result) add(o *result) {
	r.acquired += o.acquired
	r.elapsed += o.elapsed
	r.lost += o.lost
	r.waits = append(r.waits, o.waits...)
	r.holds = append(r.holds, o.holds...)
	r.handoffs += o.handoffs
	r.handoffLat = append(r.handoffLat, o.handoffLat...)
	r.cpu += o.cpu
	r.agentCPU += o.agentCPU
}

// workerCPU reads the "cpu SELF AGENT" line (ns) a Python or Node worker writes on
// stderr: its CPU time and its agent's over the measured cycles.
func workerCPU(stderr string) (self, agent time.Duration) {
	for _, line := range strings.Split(stderr, "\n") {
		var s, a int64
		if n, _ := fmt.Sscanf(line, "cpu %d %d", &s, &a); n == 2 {
			return time.Duration(s), time.Duration(a)
		}
	}
	return 0, 0
}

// trueHandoffsPerSec counts only acquisitions that changed hands.
func (r *result) trueHandoffsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.handoffs) / r.elapsed.Seconds()
}

// suiteEnv is where and with what the suite runs its workers.
type suiteEnv struct {
	self    string // this executable: the Go workers
	base    string // parent of each run's directory; "" for the default
	modules string // node_modules with proper-lockfile, as given
	node    *nodeSetup
	python  *pythonSetup
	notes   []string // rows left out, and why
}

func (r *result) handoffsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.acquired) / r.elapsed.Seconds()
}

func runSuite(se *suiteEnv, out string, counts []int, list []impl, total, rounds int, budget time.Duration, quick, png bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	se.self = self
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if _, err := exec.LookPath("flock"); err != nil {
		list = se.leaveOut(list, "flock(1) not found (util-linux)", func(im impl) bool { return im.perProcess })
	}
	if needsNode(list) {
		node, why := findNode(se.modules)
		if node == nil {
			list = se.leaveOut(list, why, func(im impl) bool { return im.node != "" })
		} else {
			defer node.cleanup()
			se.node = node
			if why := node.buildHold(); why != "" {
				list = se.leaveOut(list, why, func(im impl) bool { return usesHoldJS(im.node) })
			}
		}
	}
	if needsPython(list) {
		py, why := findPython()
		if py == nil {
			list = se.leaveOut(list, why, func(im impl) bool { return im.python != "" })
		} else {
			defer py.cleanup()
			se.python = py
		}
	}
	began := time.Now()
	// The headline comparisons first, while the machine is as quiet as
	// it will be.
	head := measureHeadline(quick)
	loadBefore := loadAverage()
	wakeBefore, meanBefore, err := wakeupLatency(self, 2000)
	if err != nil {
		return err
	}
	var results []*result
	// Each implementation's acquisitions are split into rounds, and the
	// rounds of all implementations alternate, so that a burst of load
	// from elsewhere on the machine falls on all of them rather than on
	// whichever ran at that moment: the ratios between rows are what the
	// suite is for.
	for _, n := range counts {
		merged := make([]*result, len(list))
		for round := 0; round < rounds; round++ {
			for i, im := range list {
				want := total
				if im.perProcess {
					want = cliAcquisitions(quick)
				}
				m := max(1, want/n/rounds)
				r, err := runOne(se, im, n, m, budget/time.Duration(rounds))
				if err != nil {
					return fmt.Errorf("%s with %d workers: %w", im.name, n, err)
				}
				if merged[i] == nil {
					merged[i] = r
				} else {
					merged[i].add(r)
				}
			}
		}
		for _, r := range merged {
			fmt.Fprintf(os.Stderr, "N=%-2d %-14s %7d acquisitions %9.0f hand-offs/s  lost %d  wait p50 %s p99 %s max %s\n",
				n, r.impl.name, r.acquired, r.handoffsPerSec(), r.lost,
				fmtDur(percentile(r.waits, 50)), fmtDur(percentile(r.waits, 99)), fmtDur(percentile(r.waits, 100)))
			results = append(results, r)
		}
	}
	cmdline := commandLine()
	wakeAfter, meanAfter, err := wakeupLatency(self, 2000)
	if err != nil {
		return err
	}
	load := fmt.Sprintf("%d rounds per worker count, implementations taking turns; load average %s before, %s after; process wake-up (half a pipe round trip) median %s / mean %s before, %s / %s after",
		rounds, loadBefore, loadAverage(), fmtDur(wakeBefore), fmtDur(meanBefore), fmtDur(wakeAfter), fmtDur(meanAfter))
	if se.base != "" {
		load += "; runs under " + se.base + " (" + fsType(se.base) + ")"
	} else {
		load += "; runs in the temporary directory (" + fsType(os.TempDir()) + ")"
	}
	if err := writeTable(filepath.Join(out, "results.md"), head, results, list, counts, cmdline, load, se.notes, time.Since(began)); err != nil {
		return err
	}
	if err := writeChart(filepath.Join(out, "waits.svg"), results, list, counts, png); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s and %s in %s\n", filepath.Join(out, "results.md"), filepath.Join(out, "waits.svg"), time.Since(began).Round(time.Second))
	for _, r := range results {
		if r.lost != 0 {
			return fmt.Errorf("%s with %d workers lost %d updates", r.impl.name, r.n, r.lost)
		}
	}
	return nil
}

// runOne starts n workers, lets them go at once, and collects their
// samples.
func runOne(se *suiteEnv, im impl, n, m int, budget time.Duration) (*result, error) {
	dir, err := os.MkdirTemp(se.base, "hold-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "counter"), fmt.Appendf(nil, "%020d\n", 0), 0o666); err != nil {
		return nil, err
	}
	type proc struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr strings.Builder
	}
	procs := make([]*proc, n)
	kill := func() {
		for _, p := range procs {
			if p != nil && p.cmd.Process != nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	}
	for i := range procs {
		p := &proc{cmd: exec.Command(se.self, "-worker", im.name, "-rundir", dir, "-m", strconv.Itoa(m), "-budget", budget.String())}
		if im.node != "" {
			p.cmd = se.node.command(im.node, dir, m, budget)
		}
		if im.python != "" {
			p.cmd = se.python.command(im.python, dir, m, budget)
		}
		p.cmd.Stderr = &p.stderr
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			kill()
			return nil, err
		}
		rc, err := p.cmd.StdoutPipe()
		if err != nil {
			kill()
			return nil, err
		}
		p.stdout = bufio.NewReader(rc)
		if err := p.cmd.Start(); err != nil {
			kill()
			return nil, err
		}
		procs[i] = p
	}
	// Every worker says it is ready (started, warmed up), then all go at
	// once when their stdin closes.
	for _, p := range procs {
		if b, err := p.stdout.ReadByte(); err != nil || b != 'r' {
			kill()
			return nil, fmt.Errorf("worker did not start: %v %s", err, p.stderr.String())
		}
	}
	for _, p := range procs {
		p.stdin.Close()
	}
	r := &result{n: n, impl: im}
	var mu sync.Mutex
	var first, last int64
	var errs []error
	var wg sync.WaitGroup
	var acqs []acquisition
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, rerr := readSamples(p.stdout)
			werr := p.cmd.Wait()
			mu.Lock()
			defer mu.Unlock()
			if err := errors.Join(rerr, werr); err != nil {
				errs = append(errs, fmt.Errorf("worker: %w: %s", err, p.stderr.String()))
				return
			}
			self, agent := workerCPU(p.stderr.String())
			r.cpu += self + agent
			r.agentCPU += agent
			r.acquired += len(s.waits)
			r.lost += int64(s.cycles)
			r.waits = append(r.waits, s.waits...)
			r.holds = append(r.holds, s.holds...)
			for k := range s.gots {
				acqs = append(acqs, acquisition{worker: i, got: s.gots[k], releasing: s.releasing[k]})
			}
			if first == 0 || s.start < first {
				first = s.start
			}
			last = max(last, s.end)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.elapsed = time.Duration(last - first)
	r.handoffs, r.handoffLat = handoffs(acqs)
	got, err := readCounter(filepath.Join(dir, "counter"))
	if err != nil {
		return nil, err
	}
	// r.lost held every cycle the workers ran, warm-ups included.
	r.lost -= int64(got)
	return r, nil
}

// samples is one worker's report.
type samples struct {
	cycles     uint64 // every critical section it ran, warm-up included
	start, end int64  // unix nanoseconds of its first request and last release
	waits      []time.Duration
	holds      []time.Duration
	gots       []int64 // unix nanoseconds of each acquisition
	releasing  []int64 // unix nanoseconds of the start of each release
}

// acquisition is one sample placed on the shared clock, for hand-offs.
type acquisition struct {
	worker         int
	got, releasing int64
}

// handoffs orders one run's acquisitions by the time they were made (the
// lock excludes, so that is the order they held it in) and returns how
// many went to another process than the previous holder, with the
// latency of each: from the previous holder beginning its release (its
// critical section done) to the next holder having the lock.
func handoffs(acqs []acquisition) (int, []time.Duration) {
	slices.SortFunc(acqs, func(a, b acquisition) int { return cmp.Compare(a.got, b.got) })
	var lat []time.Duration
	for i := 1; i < len(acqs); i++ {
		if acqs[i].worker != acqs[i-1].worker {
			lat = append(lat, time.Duration(max(acqs[i].got-acqs[i-1].releasing, 0)))
		}
	}
	return len(lat), lat
}

// The report is little-endian int64s: cycles, start, end, count, then
// count quadruples of (wait, hold, got, releasing) in nanoseconds, the
// last two as Unix times. bench/node/worker.js writes the same.
func writeSamples(w io.Writer, s *samples) error {
	buf := []int64{int64(s.cycles), s.start, s.end, int64(len(s.waits))}
	for i := range s.waits {
		buf = append(buf, int64(s.waits[i]), int64(s.holds[i]), s.gots[i], s.releasing[i])
	}
	return binary.Write(w, binary.LittleEndian, buf)
}

func readSamples(r io.Reader) (*samples, error) {
	var head [4]int64
	if err := binary.Read(r, binary.LittleEndian, &head); err != nil {
		return nil, fmt.Errorf("reading report: %w", err)
	}
	s := &samples{cycles: uint64(head[0]), start: head[1], end: head[2]}
	quads := make([]int64, 4*head[3])
	if err := binary.Read(r, binary.LittleEndian, quads); err != nil {
		return nil, fmt.Errorf("reading report: %w", err)
	}
	for i := 0; i < len(quads); i += 4 {
		s.waits = append(s.waits, time.Duration(quads[i]))
		s.holds = append(s.holds, time.Duration(quads[i+1]))
		s.gots = append(s.gots, quads[i+2])
		s.releasing = append(s.releasing, quads[i+3])
	}
	return s, nil
}

// workerMain is one worker process: warm up, say ready, wait for the
// start (stdin closes), then take the lock m times or until the budget is
// spent, and report.
func workerMain(name, dir string, m int, budget time.Duration) int {
	var im *impl
	for _, c := range impls() {
		if c.name == name {
			im = &c
			break
		}
	}
	if im == nil || im.node != "" || im.python != "" {
		fmt.Fprintln(os.Stderr, "unknown implementation", name)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cpath := filepath.Join(dir, "counter")
	counter, err := os.OpenFile(cpath, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := &workerEnv{lock: filepath.Join(dir, "target.lock"), target: filepath.Join(dir, "target"),
		counter: counter, self: self, cpath: cpath}
	s := &samples{}
	if !im.perProcess {
		// One acquisition before the start: first-use costs (creating the
		// lock file and queue, loading code) are not what is measured.
		if _, err := im.cycle(w); err != nil {
			fmt.Fprintln(os.Stderr, "warm-up:", err)
			return 1
		}
		s.cycles++
	}
	os.Stdout.Write([]byte{'r'})
	io.Copy(io.Discard, os.Stdin)
	deadline := time.Now().Add(budget)
	for i := 0; i < m && (i == 0 || time.Now().Before(deadline)); i++ {
		t, err := im.cycle(w)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cycle:", err)
			return 1
		}
		s.cycles++
		if i == 0 {
			s.start = t.start.UnixNano()
		}
		s.end = t.done.UnixNano()
		s.waits = append(s.waits, t.got.Sub(t.start))
		s.holds = append(s.holds, t.done.Sub(t.got))
		s.gots = append(s.gots, t.got.UnixNano())
		s.releasing = append(s.releasing, t.releasing.UnixNano())
	}
	bw := bufio.NewWriter(os.Stdout)
	if err := writeSamples(bw, s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := bw.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
