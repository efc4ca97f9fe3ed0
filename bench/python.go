//go:build unix

package main

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The Python rows run bench/python/worker.py: hold's Python package (in
// ../python) and, as the baseline, py-filelock's FileLock with its default
// settings, the lock most Python programs take, on the same work, machine
// and filesystem.

//go:embed python/worker.py
var pythonWorker []byte

// The worker modes of the "hold (Python)" and "hold.filelock" rows.
const (
	pythonHoldMode   = "hold"
	pythonDropInMode = "hold.filelock"
)

// pythonSetup is a Python with filelock to run workers with, and hold for
// the Python package's agent.
type pythonSetup struct {
	bin     string
	tmp     string // holds the worker script and hold
	script  string
	holdBin string // the agent, built from the parent module
	holdPy  string // the package's source directory (../python/src)
}

func needsPython(list []impl) bool {
	for _, im := range list {
		if im.python != "" {
			return true
		}
	}
	return false
}

// findPython finds a python3 that imports filelock (Debian's first, where
// python3-filelock installs it), and builds hold from the parent module
// for the Python package. It returns nil and the reason when it cannot.
func findPython() (*pythonSetup, string) {
	var bin string
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if p, err := exec.LookPath(py); err == nil && exec.Command(p, "-c", "import filelock").Run() == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		return nil, "no python3 with filelock (Debian package python3-filelock)"
	}
	root, err := filepath.Abs("..")
	if err != nil {
		return nil, err.Error()
	}
	src := filepath.Join(root, "python", "src")
	if _, err := os.Stat(filepath.Join(src, "hold", "__init__.py")); err != nil {
		return nil, "the Python package (../python/src/hold) not found"
	}
	tmp, err := os.MkdirTemp("", "hold-bench-python-")
	if err != nil {
		return nil, err.Error()
	}
	script := filepath.Join(tmp, "worker.py")
	if err := os.WriteFile(script, pythonWorker, 0o644); err != nil {
		os.RemoveAll(tmp)
		return nil, err.Error()
	}
	build := exec.Command("go", "build", "-o", tmp+string(filepath.Separator), "./cmd/hold")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Sprintf("building hold for the Python package: %v: %s", err, out)
	}
	return &pythonSetup{bin: bin, tmp: tmp, script: script, holdBin: filepath.Join(tmp, "hold"), holdPy: src}, ""
}

func (p *pythonSetup) cleanup() { os.RemoveAll(p.tmp) }

// command runs one Python worker in mode on the run directory dir.
func (p *pythonSetup) command(mode, dir string, m int, budget time.Duration) *exec.Cmd {
	cmd := exec.Command(p.bin, p.script, mode, dir, strconv.Itoa(m), strconv.FormatInt(budget.Milliseconds(), 10))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if mode != "filelock" {
		cmd.Env = append(cmd.Env, "HOLD_BIN="+p.holdBin, "HOLD_PY="+p.holdPy)
	}
	return cmd
}

// writeAgainstFilelock compares hold's Python package, and its drop-in
// hold.filelock, with filelock in this run: at N = 1 the uncontended lock
// + release (goal: at most 3× filelock's time, i.e. at least 1/3 its rate,
// and at most 3× its CPU), at N > 1 the hand-offs between processes (goal:
// at least 5× filelock's, with a p99 wait at least 5× shorter). Every
// Python row gets its CPU per cycle.
func writeAgainstFilelock(b *strings.Builder, results []*result, counts []int) {
	type row struct{ hold, fl *result }
	var rows []row
	for _, name := range []string{"hold (Python)", "hold.filelock"} {
		for _, n := range counts {
			if h, f := find(results, n, name), find(results, n, "filelock"); h != nil && f != nil {
				rows = append(rows, row{h, f})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## hold's Python package against filelock (ratios within this run)\n\n")
	fmt.Fprintf(b, "Goals: at N = 1 (uncontended lock() + release(), or the drop-in's acquire() + release()) a cycle at most 3× filelock's (its rate ≥ 0.33×), and at most 3× its CPU; ")
	fmt.Fprintf(b, "at N = 8 ≥ 5× filelock's hand-offs/s (acquisitions by another process than the previous holder) and a p99 wait ≥ 5× shorter.\n\n")
	fmt.Fprintf(b, "filelock's holder mostly takes the lock straight back (its waiters sleep 50 ms between tries), so most of its acquisitions do not wait at all: ")
	fmt.Fprintf(b, "its p99 wait is that of acquisitions that changed nothing. The p99 of the hand-offs' latency and the longest wait show what its waiters get.\n\n")
	fmt.Fprintf(b, "| N | row | acquisitions/s | filelock acquisitions/s | ratio | hand-offs/s | filelock hand-offs/s | ratio | p99 wait | filelock p99 wait | filelock p99 / hold p99 | p99 hand-off | filelock p99 hand-off | max wait | filelock max wait | filelock max / hold max |\n")
	fmt.Fprintf(b, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	div := func(a, b float64) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, r := range rows {
		hp, fp := percentile(r.hold.waits, 99), percentile(r.fl.waits, 99)
		hm, fm := percentile(r.hold.waits, 100), percentile(r.fl.waits, 100)
		fmt.Fprintf(b, "| %d | %s | %.0f | %.0f | %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.hold.n, r.hold.impl.name,
			r.hold.handoffsPerSec(), r.fl.handoffsPerSec(), div(r.hold.handoffsPerSec(), r.fl.handoffsPerSec()),
			r.hold.trueHandoffsPerSec(), r.fl.trueHandoffsPerSec(), div(r.hold.trueHandoffsPerSec(), r.fl.trueHandoffsPerSec()),
			fmtDur(hp), fmtDur(fp), div(float64(fp), float64(hp)),
			fmtDur(percentile(r.hold.handoffLat, 99)), fmtDur(percentile(r.fl.handoffLat, 99)),
			fmtDur(hm), fmtDur(fm), div(float64(fm), float64(hm)))
	}
	fmt.Fprintf(b, "\nTime and CPU time per acquisition over the measured cycles, each Python row's (time: the run's wall time over its acquisitions; CPU: the Python processes' own, plus their agents', from os.times() and /proc/PID/stat):\n\n")
	fmt.Fprintf(b, "| N | row | time per cycle | / filelock's | CPU per cycle | of which the agent | CPUs busy (CPU / wall) | / filelock's |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range counts {
		fl := find(results, n, "filelock")
		for _, name := range []string{"filelock", "hold (Python)", "hold.filelock"} {
			r := find(results, n, name)
			if r == nil || r.acquired == 0 {
				continue
			}
			busy, ratio, timeRatio := 0.0, "—", "—"
			if r.elapsed > 0 {
				busy = float64(r.cpu) / float64(r.elapsed)
			}
			if fl != nil && fl.acquired > 0 && fl.cpu > 0 {
				ratio = div(float64(r.cpu)/float64(r.acquired), float64(fl.cpu)/float64(fl.acquired))
			}
			if fl != nil && fl.acquired > 0 && fl.elapsed > 0 {
				timeRatio = div(float64(r.elapsed)/float64(r.acquired), float64(fl.elapsed)/float64(fl.acquired))
			}
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %.2f | %s |\n", n, name, fmtDur(r.elapsed/time.Duration(r.acquired)), timeRatio,
				fmtDur(r.cpu/time.Duration(r.acquired)), fmtDur(r.agentCPU/time.Duration(r.acquired)), busy, ratio)
		}
	}
}
