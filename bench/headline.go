//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gofrs "github.com/gofrs/flock"
	"github.com/rogpeppe/go-internal/lockedfile"
	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
)

// The headline rows compare what one lock costs with what a user would
// otherwise pick, in the same run: a Go acquisition against gofrs/flock
// with a new Flock per acquisition (what a short-lived caller does), and a
// `hold run` against `flock(1)` as whole processes.

// uncontendedOp is one uncontended acquisition and release, on lock path
// p (target t for hold).
type uncontendedOp struct {
	name string
	op   func(p, t string) error
}

func uncontendedOps() []uncontendedOp {
	ctx := context.Background()
	return []uncontendedOp{
		{"hold", func(_, t string) error {
			l, err := hold.Acquire(ctx, t)
			if err != nil {
				return err
			}
			return l.Release()
		}},
		{"gofrs/flock", func(p, _ string) error {
			f := gofrs.New(p)
			if err := f.Lock(); err != nil {
				return err
			}
			return f.Unlock()
		}},
		{"flock(2)", func(p, _ string) error {
			fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o666)
			if err != nil {
				return err
			}
			err = unix.Flock(fd, unix.LOCK_EX)
			unix.Flock(fd, unix.LOCK_UN)
			unix.Close(fd)
			return err
		}},
		{"lockedfile", func(p, _ string) error {
			unlock, err := lockedfile.MutexAt(p).Lock()
			if err != nil {
				return err
			}
			unlock()
			return nil
		}},
	}
}

// measureUncontended times each op per acquisition: rounds of batch
// acquisitions, the ops taking turns round by round so that the machine's
// drift hits them alike, and returns each op's median over the rounds.
func measureUncontended(dir string, rounds, batch int) (map[string]time.Duration, error) {
	ops := uncontendedOps()
	per := make(map[string][]time.Duration)
	for r := 0; r < rounds; r++ {
		for _, o := range ops {
			t := filepath.Join(dir, "u-"+strings.ReplaceAll(o.name, "/", "-"))
			p := t + ".lock"
			if err := o.op(p, t); err != nil { // warm: create the file
				return nil, fmt.Errorf("%s: %w", o.name, err)
			}
			start := time.Now()
			for i := 0; i < batch; i++ {
				if err := o.op(p, t); err != nil {
					return nil, fmt.Errorf("%s: %w", o.name, err)
				}
			}
			per[o.name] = append(per[o.name], time.Since(start)/time.Duration(batch))
		}
	}
	med := make(map[string]time.Duration)
	for name, ds := range per {
		med[name] = median(ds)
	}
	return med, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// wholeProcess is one command of the whole-process rows.
type wholeProcess struct {
	name string
	argv []string
}

// wholeProcesses are the commands the whole-process rows time: the peers
// (flock(1), and floor, the least a Go program that runs a command costs)
// and hold's everyday commands, each on a small file in dir.
func wholeProcesses(holdBin, floorBin string) ([]wholeProcess, error) {
	var cmds []wholeProcess
	for _, tool := range []string{"flock", "true", "cat"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found: %w", tool, err)
		}
	}
	return append(cmds,
		wholeProcess{"flock", []string{"flock", "T.lock", "true"}},
		wholeProcess{"floor", []string{floorBin, "true"}},
		wholeProcess{"hold run", []string{holdBin, "run", "T", "--", "true"}},
		wholeProcess{"hold status", []string{holdBin, "status", "T"}},
		wholeProcess{"hold update", []string{holdBin, "update", "small.json", "--", "cat"}},
		wholeProcess{"hold version", []string{holdBin, "version"}},
	), nil
}

// measureWholeProcesses runs every command once per round, in an order
// that rotates from round to round, so that the machine's drift hits them
// alike, and returns each command's times, round by round.
func measureWholeProcesses(dir string, cmds []wholeProcess, runs int) (map[string][]time.Duration, error) {
	if err := os.WriteFile(filepath.Join(dir, "small.json"), []byte(`{"hooks":["a","b"]}`+"\n"), 0o644); err != nil {
		return nil, err
	}
	run := func(argv []string) (time.Duration, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		start := time.Now()
		out, err := cmd.CombinedOutput()
		// hold status answers "free" with exit 1, by design.
		if err != nil && !(len(argv) > 1 && argv[1] == "status" && cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 1) {
			return 0, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
		return time.Since(start), nil
	}
	times := make(map[string][]time.Duration)
	for i := 0; i < runs+2; i++ {
		for j := range cmds {
			c := cmds[(i+j)%len(cmds)]
			d, err := run(c.argv)
			if err != nil {
				return nil, err
			}
			if i >= 2 { // the first rounds warm the page cache
				times[c.name] = append(times[c.name], d)
			}
		}
	}
	return times, nil
}

// medianRatio is the median over rounds of a's time over b's in the same
// round.
func medianRatio(a, b []time.Duration) float64 {
	rs := make([]float64, 0, len(a))
	for i := range min(len(a), len(b)) {
		rs = append(rs, float64(a[i])/float64(b[i]))
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

// buildHold builds cmd/hold, from the hold module this suite is built
// against, into dir and returns the executable's path.
func buildHold(dir string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/hold-dev/hold").Output()
	if err != nil {
		return "", fmt.Errorf("finding the hold module: %w", err)
	}
	exe := filepath.Join(dir, "hold")
	cmd := exec.Command("go", "build", "-o", exe, "./cmd/hold")
	cmd.Dir = strings.TrimSpace(string(out))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building hold: %v: %s", err, out)
	}
	return exe, nil
}

// buildFloor builds this module's floor command into dir.
func buildFloor(dir string) (string, error) {
	exe := filepath.Join(dir, "floor")
	if out, err := exec.Command("go", "build", "-o", exe, "github.com/hold-dev/hold/bench/floor").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building floor: %v: %s", err, out)
	}
	return exe, nil
}

// headline is what the results' first table reports.
type headline struct {
	uncontended map[string]time.Duration
	// processes are the whole-process commands' times, round by round.
	processes       map[string][]time.Duration
	procErr, uncErr error
}

// measureHeadline runs the in-process and whole-process comparisons.
func measureHeadline(quick bool) *headline {
	h := &headline{}
	dir, err := os.MkdirTemp("", "hold-bench-headline-")
	if err != nil {
		h.uncErr, h.procErr = err, err
		return h
	}
	defer os.RemoveAll(dir)
	rounds, batch, runs := 15, 20000, 40
	if quick {
		rounds, batch, runs = 5, 2000, 10
	}
	h.uncontended, h.uncErr = measureUncontended(dir, rounds, batch)
	h.processes, h.procErr = func() (map[string][]time.Duration, error) {
		holdBin, err := buildHold(dir)
		if err != nil {
			return nil, err
		}
		floorBin, err := buildFloor(dir)
		if err != nil {
			return nil, err
		}
		cmds, err := wholeProcesses(holdBin, floorBin)
		if err != nil {
			return nil, err
		}
		return measureWholeProcesses(dir, cmds, runs)
	}()
	return h
}

// writeHeadline writes the headline table: each ratio against its goal.
func writeHeadline(b *strings.Builder, h *headline, results []*result, counts []int) {
	fmt.Fprintf(b, "## Headline: what one lock costs, against the peer a user would pick\n\n")
	fmt.Fprintf(b, "| what | hold | peer | hold / peer | goal |\n|---|---:|---:|---:|---|\n")
	if h.uncErr != nil {
		fmt.Fprintf(b, "| uncontended Acquire+Release | — | — | — | %v |\n", h.uncErr)
	} else {
		u := h.uncontended
		r := ratio(u["hold"], u["gofrs/flock"])
		fmt.Fprintf(b, "| uncontended Acquire+Release, in process (median of rounds) | %s | gofrs/flock %s | %.2f | ≤ 1.25: %s |\n",
			fmtDur(u["hold"]), fmtDur(u["gofrs/flock"]), r, verdict(r <= 1.25))
		fmt.Fprintf(b, "| the same, other peers | | flock(2) open+lock+unlock+close %s, lockedfile %s | %.2f, %.2f | — |\n",
			fmtDur(u["flock(2)"]), fmtDur(u["lockedfile"]), ratio(u["hold"], u["flock(2)"]), ratio(u["hold"], u["lockedfile"]))
	}
	for _, n := range counts {
		hr, gr := find(results, n, "hold"), find(results, n, "gofrs/flock")
		if hr == nil || gr == nil {
			continue
		}
		r := hr.handoffsPerSec() / gr.handoffsPerSec()
		fmt.Fprintf(b, "| hand-offs/s, %d processes, tiny critical section | %.0f | gofrs/flock %.0f | %.2f | ≥ 0.85: %s |\n",
			n, hr.handoffsPerSec(), gr.handoffsPerSec(), r, verdict(r >= 0.85))
	}
	if h.procErr != nil {
		fmt.Fprintf(b, "| `hold run T -- true` | — | — | — | %v |\n", h.procErr)
	} else {
		p := h.processes
		r := medianRatio(p["hold run"], p["flock"])
		fmt.Fprintf(b, "| `hold run T -- true`, whole process (medians; ratio: median of per-round ratios) | %s | `flock T.lock true` %s | %.2f | ≤ 1.3: %s |\n",
			fmtDur(median(p["hold run"])), fmtDur(median(p["flock"])), r, verdict(r <= 1.3))
		r = medianRatio(p["hold run"], p["floor"])
		fmt.Fprintf(b, "| the same against the floor: a minimal Go program running `true` (bench/floor) | | %s | %.2f | ≤ 1.15: %s |\n",
			fmtDur(median(p["floor"])), r, verdict(r <= 1.15))
		for _, row := range []struct{ name, what string }{
			{"hold status", "`hold status T`"},
			{"hold update", "`hold update small.json -- cat`"},
			{"hold version", "`hold version` (start-up only, no lock)"},
		} {
			fmt.Fprintf(b, "| %s, against the floor | %s | %s | %.2f | — |\n",
				row.what, fmtDur(median(p[row.name])), fmtDur(median(p["floor"])), medianRatio(p[row.name], p["floor"]))
		}
	}
	writeNodeHeadline(b, results)
	b.WriteString("\n")
}
