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

// measureCLI times `hold run T -- true` and `flock T.lock true` as whole
// processes, alternating, and returns their medians.
func measureCLI(dir, holdBin string, runs int) (holdMed, flockMed time.Duration, err error) {
	flockBin, err := exec.LookPath("flock")
	if err != nil {
		return 0, 0, fmt.Errorf("flock(1) not found: %w", err)
	}
	trueBin, err := exec.LookPath("true")
	if err != nil {
		return 0, 0, err
	}
	run := func(argv ...string) (time.Duration, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
		return time.Since(start), nil
	}
	var hs, fs []time.Duration
	for i := 0; i < runs+2; i++ {
		h, err := run(holdBin, "run", "T", "--", trueBin)
		if err != nil {
			return 0, 0, err
		}
		f, err := run(flockBin, "T.lock", trueBin)
		if err != nil {
			return 0, 0, err
		}
		if i >= 2 { // the first runs warm the page cache
			hs, fs = append(hs, h), append(fs, f)
		}
	}
	return median(hs), median(fs), nil
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

// headline is what the results' first table reports.
type headline struct {
	uncontended    map[string]time.Duration
	cliHold        time.Duration
	cliFlock       time.Duration
	cliErr, uncErr error
}

// measureHeadline runs the in-process and whole-process comparisons.
func measureHeadline(quick bool) *headline {
	h := &headline{}
	dir, err := os.MkdirTemp("", "hold-bench-headline-")
	if err != nil {
		h.uncErr, h.cliErr = err, err
		return h
	}
	defer os.RemoveAll(dir)
	rounds, batch, runs := 15, 20000, 40
	if quick {
		rounds, batch, runs = 5, 2000, 10
	}
	h.uncontended, h.uncErr = measureUncontended(dir, rounds, batch)
	if bin, err := buildHold(dir); err != nil {
		h.cliErr = err
	} else {
		h.cliHold, h.cliFlock, h.cliErr = measureCLI(dir, bin, runs)
	}
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
	if h.cliErr != nil {
		fmt.Fprintf(b, "| `hold run T -- true` | — | — | — | %v |\n", h.cliErr)
	} else {
		r := ratio(h.cliHold, h.cliFlock)
		fmt.Fprintf(b, "| `hold run T -- true`, whole process (median, alternating) | %s | `flock T.lock true` %s | %.2f | ≤ 1.3: %s |\n",
			fmtDur(h.cliHold), fmtDur(h.cliFlock), r, verdict(r <= 1.3))
	}
	b.WriteString("\n")
}
