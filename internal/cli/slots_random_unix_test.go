//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Random alternations of plain, shared and slot holders of one target,
// tries, timed waits and the default wait, with waiters and holders
// stopped and resumed and holders killed, on each local protocol. Each
// critical section records its entry and exit from inside, on
// CLOCK_MONOTONIC, with the token and slot hold gave it, and the whole
// history is judged at the end: never a plain holder beside anyone,
// never two holders of one slot or more than N of a semaphore, tokens
// unique among exclusive and slot holders and rising across every plain
// holder. HOLD_TEST_SLOT_OPS sets the operations per protocol (default
// 90; the trial is 1000) and HOLD_TEST_SEED the seed.

func init() { testRoles["slot-section"] = slotSection }

// monoNow is CLOCK_MONOTONIC in nanoseconds, the one clock every process
// of the machine shares.
func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// slotSection is the critical section the random trial's holders run:
// it appends "enter ID MONO TOKEN SLOT" to $SEC_LOG, sleeps $SEC_MS, and
// appends "exit ID MONO". Each line is one write to a file opened with
// O_APPEND, so lines of concurrent sections never mix.
func slotSection() int {
	f, err := os.OpenFile(os.Getenv("SEC_LOG"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	id := os.Getenv("SEC_ID")
	fmt.Fprintf(f, "enter %s %d %s %s\n", id, monoNow(), os.Getenv("HOLD_TOKEN"), os.Getenv("HOLD_SLOT"))
	ms, _ := strconv.Atoi(os.Getenv("SEC_MS"))
	time.Sleep(time.Duration(ms) * time.Millisecond)
	fmt.Fprintf(f, "exit %s %d\n", id, monoNow())
	return 0
}

// section is one operation of the trial and what became of it.
type section struct {
	id          int
	mode        string // "plain", "shared" or "slots"
	n           int    // N for slots
	args        []string
	entered     bool
	enter, exit int64
	token       uint64
	slot        int
	killedAt    int64 // when the nemesis killed it, 0 if it did not
	code        int
	stderr      string
}

func (s *section) String() string {
	return fmt.Sprintf("#%d %s(N=%d) token %d slot %d [%d, %d] %v", s.id, s.mode, s.n, s.token, s.slot, s.enter, s.exit, s.args)
}

func TestSlotsRandomAlternations(t *testing.T) {
	t.Parallel()
	ops := 90
	if v, err := strconv.Atoi(os.Getenv("HOLD_TEST_SLOT_OPS")); err == nil && v > 0 {
		ops = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("HOLD_TEST_SEED"), 10, 64); err == nil {
		seed = v
	}
	for _, proto := range []struct {
		name  string
		flags []string
	}{{"kernel", nil}, {"fair", []string{"--fair"}}, {"portable", []string{"--protocol", "dir"}}} {
		t.Run(proto.name, func(t *testing.T) {
			t.Parallel()
			runAlternations(t, seed, ops, proto.flags)
		})
	}
}

// runAlternations runs one protocol's trial and judges its history.
func runAlternations(t *testing.T, seed uint64, ops int, protoFlags []string) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "history")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 53))
	// The portable protocol has no shared locks, and takes a plain lock
	// for a semaphore of one slot: refused (64) while slots are held.
	portable := slices.Contains(protoFlags, "dir")
	t.Logf("seed %d (HOLD_TEST_SEED=%d reruns this schedule), %d operations", seed, seed, ops)

	var (
		mu      sync.Mutex
		running = map[int]*exec.Cmd{}
		all     []*section
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, 6)
	semN := 2
	stopNemesis := make(chan struct{})
	nemesisDone := make(chan struct{})
	nrng := rand.New(rand.NewPCG(seed, 54))
	go func() {
		// The nemesis: every 100-400 ms, stop a running holder or waiter
		// for up to 1.5 s, or kill one (its hold and its section, as a
		// crash would).
		defer close(nemesisDone)
		for {
			select {
			case <-stopNemesis:
				return
			case <-time.After(time.Duration(100+nrng.IntN(300)) * time.Millisecond):
			}
			mu.Lock()
			ids := make([]int, 0, len(running))
			for id := range running {
				ids = append(ids, id)
			}
			sort.Ints(ids)
			if len(ids) == 0 {
				mu.Unlock()
				continue
			}
			id := ids[nrng.IntN(len(ids))]
			cmd := running[id]
			s := all[id]
			switch r := nrng.IntN(10); {
			case r < 8:
				pause := time.Duration(100+nrng.IntN(1400)) * time.Millisecond
				syscall.Kill(-cmd.Process.Pid, syscall.SIGSTOP)
				mu.Unlock()
				go func() {
					time.Sleep(pause)
					syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
				}()
			default:
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				s.killedAt = monoNow()
				mu.Unlock()
			}
		}
	}()

	for i := 0; i < ops; i++ {
		s := &section{id: i, slot: -1}
		switch r := rng.IntN(20); {
		case r < 6:
			s.mode = "plain"
		case r < 9 && !portable:
			s.mode = "shared"
		default:
			s.mode = "slots"
			if rng.IntN(25) == 0 {
				semN = 2 + rng.IntN(3)
			}
			s.n = semN
		}
		args := append([]string{"run"}, protoFlags...)
		switch s.mode {
		case "shared":
			args = append(args, "-s")
		case "slots":
			args = append(args, "--slots", strconv.Itoa(s.n))
		}
		switch r := rng.IntN(10); {
		case r < 2:
			args = append(args, "-n")
		case r < 7:
			args = append(args, "-w", fmt.Sprintf("%.2f", 0.05+rng.Float64()*2))
		default:
			args = append(args, "-w", "20")
		}
		args = append(args, "T", "--", self)
		s.args = args
		ms := 5 + rng.IntN(60)
		pause := time.Duration(rng.IntN(40)) * time.Millisecond
		mu.Lock()
		all = append(all, s)
		mu.Unlock()
		sem <- struct{}{}
		time.Sleep(pause)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*hangLimit)
			defer cancel()
			cmd := exec.CommandContext(ctx, holdBin, s.args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), roleEnv+"=slot-section", "SEC_LOG="+logPath, "SEC_ID="+strconv.Itoa(s.id), "SEC_MS="+strconv.Itoa(ms))
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			mu.Lock()
			err := cmd.Start()
			if err == nil {
				running[s.id] = cmd
			}
			mu.Unlock()
			if err != nil {
				s.code, s.stderr = -2, err.Error()
				return
			}
			cmd.Wait()
			mu.Lock()
			delete(running, s.id)
			// A stopped group is let go, so that nothing is left behind.
			syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
			mu.Unlock()
			if ctx.Err() != nil {
				s.code = -3
			} else {
				s.code = cmd.ProcessState.ExitCode()
				if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
					s.code = 128 + int(ws.Signal())
				}
			}
			s.stderr = errb.String()
		}()
	}
	wg.Wait()
	close(stopNemesis)
	<-nemesisDone
	// Sections of killed groups may still be running for an instant.
	time.Sleep(100 * time.Millisecond)

	problems := judgeHistory(t, logPath, all, portable)
	if len(problems) > 0 {
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("hold-slot-history-%d", seed))
		data, _ := os.ReadFile(logPath)
		os.WriteFile(keep, data, 0o644)
		for _, p := range problems {
			t.Error(p)
		}
		t.Errorf("seed %d: %d problems; the history is kept in %s", seed, len(problems), keep)
	}
}

// judgeHistory reads the sections' records into all and returns every
// broken promise it finds.
func judgeHistory(t *testing.T, logPath string, all []*section, portable bool) []string {
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var problems []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			problems = append(problems, "a torn history line: "+sc.Text())
			continue
		}
		id, _ := strconv.Atoi(fields[1])
		at, _ := strconv.ParseInt(fields[2], 10, 64)
		if id < 0 || id >= len(all) {
			continue
		}
		s := all[id]
		switch fields[0] {
		case "enter":
			s.entered, s.enter = true, at
			if len(fields) >= 5 {
				s.token, _ = strconv.ParseUint(fields[3], 10, 64)
				s.slot, _ = strconv.Atoi(fields[4])
			}
		case "exit":
			s.exit = at
		}
	}
	var entered []*section
	counts := map[int]int{}
	for _, s := range all {
		counts[s.code]++
		switch {
		case s.code == 0, s.code == 1:
		case s.code == 64 && (s.mode == "slots" || portable && s.mode == "plain"):
			// Another N while slots were held: refused, as promised.
		case s.killedAt != 0:
		default:
			problems = append(problems, fmt.Sprintf("%v: exit %d: %s", s, s.code, s.stderr))
		}
		if !s.entered {
			continue
		}
		if s.exit == 0 {
			if s.killedAt == 0 {
				problems = append(problems, fmt.Sprintf("%v: entered and never left, yet was not killed", s))
				continue
			}
			// Killed in its section: it did nothing after the kill.
			s.exit = s.killedAt
		}
		entered = append(entered, s)
	}
	t.Logf("exit codes %v, %d sections entered", counts, len(entered))
	if len(entered) < len(all)/20 {
		problems = append(problems, fmt.Sprintf("only %d of %d operations entered their section: the trial proves little", len(entered), len(all)))
	}
	overlap := func(a, b *section) bool { return a.enter < b.exit && b.enter < a.exit }
	tokens := map[uint64]*section{}
	// A portable plain lock of a path no kernel holder used has no token
	// (docs/portable.md: its directory, and any counter in it, goes on
	// release); every other exclusive and slot holder has one.
	tokenless := func(s *section) bool { return s.mode == "shared" || portable && s.mode == "plain" && s.token == 0 }
	for i, a := range entered {
		if !tokenless(a) {
			if a.token == 0 {
				problems = append(problems, fmt.Sprintf("%v: no token", a))
			} else if b := tokens[a.token]; b != nil {
				problems = append(problems, fmt.Sprintf("token %d twice: %v and %v", a.token, b, a))
			}
			tokens[a.token] = a
		}
		held := 1
		for _, b := range entered[i+1:] {
			if !overlap(a, b) {
				if a.mode == "plain" || b.mode == "plain" {
					first, second := a, b
					if b.exit < a.enter {
						first, second = b, a
					}
					if !tokenless(first) && !tokenless(second) && first.token >= second.token {
						problems = append(problems, fmt.Sprintf("token went back: %v, then %v", first, second))
					}
				}
				continue
			}
			switch {
			case a.mode == "plain" || b.mode == "plain":
				problems = append(problems, fmt.Sprintf("a plain holder beside another: %v and %v", a, b))
			case a.mode == "slots" && b.mode == "slots":
				if a.slot == b.slot {
					problems = append(problems, fmt.Sprintf("two holders of slot %d: %v and %v", a.slot, a, b))
				}
				if a.n != b.n {
					problems = append(problems, fmt.Sprintf("holders with different N at once: %v and %v", a, b))
				}
			}
		}
		if a.mode == "slots" {
			// How many slot holders were in at a's entry.
			for _, b := range entered {
				if b != a && b.mode == "slots" && b.enter <= a.enter && a.enter < b.exit {
					held++
				}
			}
			if held > a.n {
				problems = append(problems, fmt.Sprintf("%d slot holders at once with N=%d, at the entry of %v", held, a.n, a))
			}
		}
	}
	return problems
}
