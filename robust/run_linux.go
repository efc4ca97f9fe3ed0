package robust

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Result is what a run did and what the checker said of it.
type Result struct {
	Seed     uint64
	Protocol string
	Ops      int // clients started
	Faults   int // faults the nemesis carried out
	Verdict  *Verdict
	Dir      string // history.jsonl and account.txt are here
	Account  string
}

// hangAfter bounds one client: a client still running this long after it
// started is stopped and reported, so a hang fails the run instead of
// stalling it.
const hangAfter = 90 * time.Second

type runner struct {
	cfg   Config
	sched Schedule
	self  string
	hist  string // per-process history files
	start int64

	mu      sync.Mutex
	live    map[int]*exec.Cmd // op -> running client
	records []Record
	faults  int
	stopped map[int]bool
}

// Run runs cfg's schedule against cfg.Hold, checks the history, and writes
// history.jsonl and account.txt to cfg.Dir.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Clients == 0 {
		cfg.Clients = 12
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	known := false
	for _, p := range Protocols {
		known = known || p == cfg.Protocol
	}
	if !known {
		return nil, fmt.Errorf("unknown protocol %q (want one of %s)", cfg.Protocol, strings.Join(Protocols, ", "))
	}
	if ents, err := os.ReadDir(cfg.Dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%s is not empty: a run needs a directory of its own (its history would mix with another's)", cfg.Dir)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, sched: NewSchedule(cfg), self: self, hist: filepath.Join(cfg.Dir, "hist"),
		live: map[int]*exec.Cmd{}, stopped: map[int]bool{}}
	if err := os.MkdirAll(r.hist, 0o755); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("flock"); err != nil {
		// flock(1) clients become hold run ones: the schedule stays the
		// same length, and the account says so.
		cfg.Log("robust: flock(1) not found; its clients run hold run instead")
		for i := range r.sched.Ops {
			if r.sched.Ops[i].Client == clientFlock {
				r.sched.Ops[i].Client = clientRun
			}
		}
	}
	r.start = now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.clients(ctx) }()
	go func() { defer wg.Done(); r.nemesis(ctx) }()
	wg.Wait()
	return r.finish()
}

func (r *runner) sleepUntil(ctx context.Context, at time.Duration) bool {
	d := time.Duration(r.start+int64(at)-now()) * time.Nanosecond
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *runner) clients(ctx context.Context) {
	sem := make(chan struct{}, r.cfg.Clients)
	var wg sync.WaitGroup
	for _, op := range r.sched.Ops {
		if !r.sleepUntil(ctx, op.At) {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break // sem may not be ours: nothing more starts
		}
		// A loaded machine runs fewer of the schedule's operations, not
		// longer than asked: what was not started by then is left out.
		if time.Duration(now()-r.start) > r.cfg.Duration {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.runOp(op)
		}()
	}
	wg.Wait()
}

func (r *runner) command(op Op) *exec.Cmd {
	env := append(os.Environ(),
		"RB_HIST="+r.hist, "RB_OP="+strconv.Itoa(op.ID), "RB_MODE="+op.Mode, "RB_N="+strconv.Itoa(op.N),
		"RB_TARGET="+op.Target, "RB_CLIENT="+op.Client, "RB_PROTO="+op.Proto, "RB_GOCALL="+op.GoCall,
		"RB_HOLDMS="+strconv.Itoa(int(op.HoldFor/time.Millisecond)), "RB_WAITMS="+strconv.Itoa(int(op.Wait/time.Millisecond)))
	if op.Try {
		env = append(env, "RB_TRY=1")
	}
	if op.SlotsOpt {
		// The update's section is a slot holder's, if the build takes it.
		env = append(env, "RB_MODE="+modeSlot)
	}
	var args []string
	wait := func() {
		if op.Try {
			args = append(args, "-n")
		} else if op.Wait > 0 {
			args = append(args, "-w", strconv.FormatFloat(op.Wait.Seconds(), 'f', 3, 64))
		}
	}
	holdFlags := func(sub string) {
		args = append(args, sub, "--verbose")
		switch op.Proto {
		case "fair":
			args = append(args, "--fair")
		case "dir":
			args = append(args, "--protocol", "dir")
		}
		switch {
		case op.Mode == modeShared:
			args = append(args, "-s")
		case op.Mode == modeSlot || op.SlotsOpt:
			args = append(args, "--slots", strconv.Itoa(op.N))
		}
		wait()
	}
	var cmd *exec.Cmd
	switch op.Client {
	case clientRun:
		holdFlags("run")
		args = append(args, op.Target, "--", r.self)
		cmd = exec.Command(r.cfg.Hold, args...)
		env = append(env, roleEnv+"="+roleSection)
	case clientUpdate:
		holdFlags("update")
		args = append(args, op.Target, "--", r.self)
		cmd = exec.Command(r.cfg.Hold, args...)
		env = append(env, roleEnv+"="+roleFilter)
	case clientAppend:
		holdFlags("append")
		args = append(args, op.Target, strconv.Itoa(op.ID))
		cmd = exec.Command(r.cfg.Hold, args...)
	case clientFlock:
		if op.Mode == modeShared {
			args = append(args, "-s")
		}
		wait()
		args = append(args, op.Target+".lock", r.self)
		cmd = exec.Command("flock", args...)
		env = append(env, roleEnv+"="+roleSection)
	case clientGo:
		cmd = exec.Command(r.self)
		env = append(env, roleEnv+"="+roleGo)
	}
	cmd.Env = env
	cmd.Dir = r.cfg.Dir
	return cmd
}

func (r *runner) runOp(op Op) {
	cmd := r.command(op)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := now()
	if err := cmd.Start(); err != nil {
		r.add(Record{Op: op.ID, Ev: "client", T: start, End: now(), Exit: -1, Stderr: err.Error(), Slot: -1})
		return
	}
	r.mu.Lock()
	r.live[op.ID] = cmd
	r.mu.Unlock()
	t := time.AfterFunc(hangAfter, func() {
		r.add(Record{Op: op.ID, Ev: "hang", T: now(), Pid: cmd.Process.Pid, Slot: -1})
		syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		cmd.Process.Kill()
	})
	err := cmd.Wait()
	t.Stop()
	end := now()
	r.mu.Lock()
	delete(r.live, op.ID)
	r.mu.Unlock()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		code = -1
	}
	s := stderr.String()
	if len(s) > 2000 {
		s = s[:2000]
	}
	r.add(Record{Op: op.ID, Ev: "client", T: start, End: end, Pid: cmd.Process.Pid, Exit: code, Stderr: s, Slot: -1,
		Target: op.Target, Client: op.Client, Proto: op.Proto, Mode: op.Mode, N: op.N})
}

func (r *runner) add(rec Record) {
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
}

// victim is the process a fault picks: among the live clients in op order,
// the Pick-th, or its first child (hold run's section, hold update's
// filter, flock(1)'s command) when the fault asks for the child.
func (r *runner) victim(f Fault) int {
	r.mu.Lock()
	ops := make([]int, 0, len(r.live))
	for op := range r.live {
		ops = append(ops, op)
	}
	sort.Ints(ops)
	if len(ops) == 0 {
		r.mu.Unlock()
		return 0
	}
	pid := r.live[ops[f.Pick%uint64(len(ops))]].Process.Pid
	r.mu.Unlock()
	if f.Child {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			if c, err := strconv.Atoi(fs[0]); err == nil {
				return c
			}
		}
	}
	return pid
}

var lockFileRE = regexp.MustCompile(`\.lock(\.slots|\.slot[0-9]+)?$`)

// lockFiles are the files of target whose loss hold watches: TARGET.lock
// (a file, or the portable protocol's directory), the semaphore's count
// file and its slot files. Queues and gates are left alone: they order
// waiters, they do not hold anyone out.
func (r *runner) lockFiles(target string) []string {
	m, _ := filepath.Glob(filepath.Join(r.cfg.Dir, target+".lock*"))
	var out []string
	for _, p := range m {
		if lockFileRE.MatchString(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (r *runner) nemesis(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range r.sched.Faults {
		if !r.sleepUntil(ctx, f.At) {
			break
		}
		rec := Record{Ev: "fault", Note: f.Kind, Target: f.Target, Op: -1, Slot: -1}
		switch f.Kind {
		case faultKill, faultStop:
			pid := r.victim(f)
			if pid == 0 {
				continue
			}
			rec.Victim = pid
			if f.Kind == faultKill {
				if syscall.Kill(pid, syscall.SIGKILL) != nil {
					continue
				}
				rec.T = now()
			} else {
				rec.T = now()
				if syscall.Kill(pid, syscall.SIGSTOP) != nil {
					continue
				}
				r.mu.Lock()
				r.stopped[pid] = true
				r.mu.Unlock()
				wg.Add(1)
				time.AfterFunc(f.StopFor, func() {
					defer wg.Done()
					syscall.Kill(pid, syscall.SIGCONT)
					r.mu.Lock()
					delete(r.stopped, pid)
					r.mu.Unlock()
				})
				rec.End = rec.T + int64(f.StopFor)
			}
		case faultRemove, faultReplace:
			files := r.lockFiles(f.Target)
			if len(files) == 0 {
				continue
			}
			p := files[f.Pick%uint64(len(files))]
			rec.File = filepath.Base(p)
			fi, err := os.Lstat(p)
			if err != nil {
				continue
			}
			if f.Kind == faultRemove {
				err = os.RemoveAll(p)
			} else if fi.IsDir() {
				tmp := p + ".nemesis"
				if err = os.Mkdir(tmp, 0o755); err == nil {
					os.RemoveAll(p)
					err = os.Rename(tmp, p)
				}
			} else {
				tmp := p + ".nemesis"
				if err = os.WriteFile(tmp, nil, 0o644); err == nil {
					err = os.Rename(tmp, p)
				}
			}
			if err != nil {
				continue
			}
			rec.T = now()
		}
		r.mu.Lock()
		r.faults++
		r.mu.Unlock()
		r.add(rec)
	}
	wg.Wait()
}

func (r *runner) finish() (*Result, error) {
	all := append([]Record(nil), r.records...)
	ents, err := os.ReadDir(r.hist)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		f, err := os.Open(filepath.Join(r.hist, e.Name()))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec Record
			if json.Unmarshal(sc.Bytes(), &rec) == nil {
				all = append(all, rec)
			}
		}
		f.Close()
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].T < all[j].T })
	hf, err := os.Create(filepath.Join(r.cfg.Dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	enc := json.NewEncoder(hf)
	for _, rec := range all {
		enc.Encode(rec)
	}
	if err := hf.Close(); err != nil {
		return nil, err
	}
	counter, _ := os.ReadFile(filepath.Join(r.cfg.Dir, counterTarget))
	logb, _ := os.ReadFile(filepath.Join(r.cfg.Dir, logTarget))
	v := Check(History{Records: all, Ops: r.sched.Ops, Start: r.start, Counter: counter, Log: logb, Mixed: r.cfg.Protocol == "mixed"})
	for _, rec := range all {
		if rec.Ev == "hang" {
			v.Failures = append(v.Failures, Finding{"hang", fmt.Sprintf("%s still ran after %v and was killed", r.sched.Ops[rec.Op], hangAfter), rec.T - r.start})
		}
	}
	started := 0
	for _, rec := range all {
		if rec.Ev == "client" {
			started++
		}
	}
	res := &Result{Seed: r.cfg.Seed, Protocol: r.cfg.Protocol, Ops: started, Faults: r.faults, Verdict: v, Dir: r.cfg.Dir}
	res.Account = account(r.cfg, res)
	var all2 strings.Builder
	for _, f := range v.Failures {
		fmt.Fprintf(&all2, "%.3fs %s: %s\n", time.Duration(f.At).Seconds(), f.Kind, f.Text)
	}
	for _, f := range v.Excused {
		fmt.Fprintf(&all2, "excused: %s\n", f.Text)
	}
	if err := os.WriteFile(filepath.Join(r.cfg.Dir, "findings.txt"), []byte(all2.String()), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(r.cfg.Dir, "account.txt"), []byte(res.Account), 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

func account(cfg Config, res *Result) string {
	var b strings.Builder
	v := res.Verdict
	fmt.Fprintf(&b, "hold robustness run: seed %d, protocol %s, duration %v, hold %s\n", cfg.Seed, cfg.Protocol, cfg.Duration, cfg.Hold)
	fmt.Fprintf(&b, "%d clients, %d faults, %d sections, %d updates and %d appends checked\n", res.Ops, res.Faults, v.Sections, v.Updates, v.Appends)
	if v.OK() {
		fmt.Fprintf(&b, "no guarantee broken\n")
	} else {
		fmt.Fprintf(&b, "%d guarantees broken; rerun with -seed %d -duration %v -protocol %s\n", len(v.Failures), cfg.Seed, cfg.Duration, cfg.Protocol)
	}
	kinds := map[string]int{}
	first := map[string]int64{}
	for _, f := range v.Failures {
		kinds[f.Kind]++
		if t, ok := first[f.Kind]; !ok || f.At < t {
			first[f.Kind] = f.At
		}
	}
	var names []string
	for k, n := range kinds {
		at := "at the end"
		if first[k] < int64(24*time.Hour) {
			at = fmt.Sprintf("first at %.1fs", time.Duration(first[k]).Seconds())
		}
		names = append(names, fmt.Sprintf("%s %d (%s)", k, n, at))
	}
	sort.Strings(names)
	if len(names) > 0 {
		fmt.Fprintf(&b, "broken, by kind: %s\n", strings.Join(names, ", "))
	}
	kinds = map[string]int{}
	for _, f := range v.Failures {
		kinds[f.Kind]++
		if kinds[f.Kind] <= 10 {
			fmt.Fprintf(&b, "FAIL %s: %s\n", f.Kind, f.Text)
		} else if kinds[f.Kind] == 11 {
			fmt.Fprintf(&b, "FAIL %s: ... (more in the history)\n", f.Kind)
		}
	}
	for i, f := range v.Excused {
		if i == 10 {
			fmt.Fprintf(&b, "excused: ... %d in all\n", len(v.Excused))
			break
		}
		fmt.Fprintf(&b, "excused (the holder was told of its loss in time): %s\n", f.Text)
	}
	return b.String()
}
