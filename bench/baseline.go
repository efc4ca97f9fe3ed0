//go:build unix

package main

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The comparison with a baseline (-baseline REV): this suite is built a
// second time against hold as it was at revision REV of the parent
// repository, and the Go rows (the uncontended cycle in process, and the
// Go implementations' hand-offs) run alternately from the two builds, in
// one run, so that both meet the same machine. The harness is this one in
// both builds; only hold differs. What it reports is current / baseline
// per row, the median of the rounds' ratios, and hold against gofrs/flock
// within each build. It is a report: nothing here fails on a ratio, since
// on a shared machine a timing must not fail a build.

// baselineImpls are the rows a baseline run compares by default: the
// in-process Go implementations.
var baselineImpls = []string{"hold", "hold fair", "hold portable", "flock(2)", "gofrs/flock", "lockedfile"}

// build is one of the two builds of the suite in a baseline run.
type build struct {
	name string // "current", or the baseline's revision
	exe  string
}

// buildBaseline extracts revision rev of the repository holding the hold
// module (the parent of this one) into dir and builds this suite against
// it there, with an alternate go.mod that replaces hold with that tree.
// It returns the executable and the full commit hash.
func buildBaseline(dir, rev string) (exe, commit string, err error) {
	holdDir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/hold-dev/hold").Output()
	if err != nil {
		return "", "", fmt.Errorf("finding the hold module: %w", err)
	}
	root := strings.TrimSpace(string(holdDir))
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err != nil {
		return "", "", fmt.Errorf("%q is not a revision of the repository at %s (git rev-parse: %v)", rev, root, err)
	}
	commit = strings.TrimSpace(string(out))
	tree := filepath.Join(dir, "hold-"+commit[:12])
	if err := gitArchive(root, commit, tree); err != nil {
		return "", "", err
	}
	// This module's go.mod and go.sum, copied, with hold replaced by
	// the extracted tree: `go build -modfile` reads them instead of
	// this module's own, which stay untouched.
	modFile := filepath.Join(dir, "baseline.mod")
	for _, f := range [][2]string{{"go.mod", modFile}, {"go.sum", strings.TrimSuffix(modFile, ".mod") + ".sum"}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			return "", "", fmt.Errorf("run the baseline comparison from the bench directory: %w", err)
		}
		if err := os.WriteFile(f[1], b, 0o644); err != nil {
			return "", "", err
		}
	}
	if out, err := goCommand("mod", "edit", "-replace=github.com/hold-dev/hold="+tree, modFile).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go mod edit: %v: %s", err, out)
	}
	exe = filepath.Join(dir, "bench-"+commit[:12])
	if out, err := goCommand("build", "-modfile", modFile, "-mod=mod", "-tags", "hold_baseline", "-o", exe, ".").CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building this suite against hold at %s: %v: %s\n(the suite must build against that revision's API; choose a later one)", rev, err, out)
	}
	return exe, commit, nil
}

func goCommand(args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	return cmd
}

// gitArchive writes the tree of commit in the repository at root into
// dir (git archive, read here rather than by tar(1)).
func gitArchive(root, commit, dir string) error {
	cmd := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	xerr := untar(pipe, dir)
	io.Copy(io.Discard, pipe)
	if err := errors.Join(xerr, cmd.Wait()); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", commit, err, stderr.String())
	}
	return nil
}

func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("archive entry %q leaves the tree", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			err = writeFileFrom(name, tr, os.FileMode(hdr.Mode)&0o777)
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				err = os.Symlink(hdr.Linkname, name)
			}
		}
		if err != nil {
			return err
		}
	}
}

func writeFileFrom(name string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode|0o200)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}

// baselineRow is one row of the comparison: its figures from each build,
// round by round.
type baselineRow struct {
	name string
	// perOp: the figure is a time per acquisition (lower is better);
	// otherwise hand-offs per second (higher is better).
	perOp bool
	cur   []float64
	base  []float64
}

// runBaseline runs the comparison: rounds rounds, in each of which every
// row runs once from each build, the two builds taking turns (which goes
// first alternates from round to round), and writes baseline.md in out.
func runBaseline(se *suiteEnv, out, rev string, counts []int, only string, total, rounds int, budget time.Duration, batch int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "hold-bench-baseline-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(os.Stderr, "building the suite against hold at %s\n", rev)
	baseExe, commit, err := buildBaseline(tmp, rev)
	if err != nil {
		return err
	}
	builds := []build{{"current", self}, {commit[:12], baseExe}}
	var list []impl
	for _, im := range impls() {
		if im.node == "" && im.python == "" && !im.perProcess &&
			(only == "" && slices.Contains(baselineImpls, im.name) || only != "" && containsName(only, im.name)) {
			list = append(list, im)
		}
	}
	rows := map[string]*baselineRow{}
	var order []string
	row := func(name string, perOp bool) *baselineRow {
		if rows[name] == nil {
			rows[name] = &baselineRow{name: name, perOp: perOp}
			order = append(order, name)
		}
		return rows[name]
	}
	loadBefore := loadAverage()
	began := time.Now()
	for round := range rounds {
		turn := builds
		if round%2 == 1 {
			turn = []build{builds[1], builds[0]}
		}
		for _, b := range turn {
			per, err := uncontendedIn(b.exe, batch)
			if err != nil {
				return fmt.Errorf("%s build, uncontended: %w", b.name, err)
			}
			for _, op := range uncontendedOps() {
				r := row("uncontended "+op.name, true)
				if b.exe == self {
					r.cur = append(r.cur, per[op.name])
				} else {
					r.base = append(r.base, per[op.name])
				}
			}
		}
		for _, n := range counts {
			for _, im := range list {
				m := max(1, total/n/rounds)
				for _, b := range turn {
					bse := *se
					bse.self = b.exe
					res, err := runOne(&bse, im, n, m, budget/time.Duration(rounds))
					if err != nil {
						return fmt.Errorf("%s build, %s with %d workers: %w", b.name, im.name, n, err)
					}
					if res.lost != 0 {
						return fmt.Errorf("%s build, %s with %d workers lost %d updates", b.name, im.name, n, res.lost)
					}
					r := row(fmt.Sprintf("N=%d %s", n, im.name), false)
					if b.exe == self {
						r.cur = append(r.cur, res.handoffsPerSec())
					} else {
						r.base = append(r.base, res.handoffsPerSec())
					}
				}
			}
		}
		fmt.Fprintf(os.Stderr, "round %d of %d done\n", round+1, rounds)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# This tree against hold at %s\n\n", rev)
	fmt.Fprintf(&b, "Command: `%s` (took %s, %s UTC).  \n", commandLine(), time.Since(began).Round(time.Second), began.UTC().Format("2006-01-02 15:04"))
	fmt.Fprintf(&b, "Baseline: %s (%s), built with this suite's harness; %d rounds, the two builds taking turns row by row, which goes first alternating by round; load average %s before, %s after.\n\n",
		rev, commit, rounds, loadBefore, loadAverage())
	b.WriteString("Each figure is the median over the rounds; *current / baseline* is the median of the rounds' ratios (for a time per acquisition, above 1 is slower; for hand-offs/s, below 1 is fewer). A report, not a test: on a shared machine the ratios move by several percent from run to run, which the rows of gofrs/flock, flock(2) and lockedfile (the same code in both builds) show.\n\n")
	b.WriteString("| row | current | baseline | current / baseline |\n|---|---:|---:|---:|\n")
	for _, name := range order {
		r := rows[name]
		fmt.Fprintf(&b, "| %s | %s | %s | %.3f |\n", r.name, r.figure(r.cur), r.figure(r.base), medianRatio64(r.cur, r.base))
	}
	b.WriteString("\nhold against gofrs/flock within each build (median of the rounds' ratios; uncontended: time, hand-offs: hand-offs/s):\n\n")
	b.WriteString("| row | current | baseline |\n|---|---:|---:|\n")
	for _, name := range order {
		peer := strings.Replace(name, "hold", "gofrs/flock", 1)
		if !strings.HasSuffix(name, " hold") || rows[peer] == nil {
			continue
		}
		h, g := rows[name], rows[peer]
		fmt.Fprintf(&b, "| %s / %s | %.3f | %.3f |\n", name, strings.TrimPrefix(peer, strings.TrimSuffix(name, "hold")), medianRatio64(h.cur, g.cur), medianRatio64(h.base, g.base))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(out, "baseline.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Print(b.String())
	fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	return nil
}

// figure formats a row's median.
func (r *baselineRow) figure(v []float64) string {
	m := median64(v)
	if r.perOp {
		return strconv.FormatFloat(m, 'f', 0, 64) + " ns"
	}
	return strconv.FormatFloat(m, 'f', 0, 64)
}

// uncontendedIn runs one round of the uncontended cycles in a process of
// exe (-uncontended) and returns each op's time per acquisition (ns).
func uncontendedIn(exe string, batch int) (map[string]float64, error) {
	cmd := exec.Command(exe, "-uncontended", strconv.Itoa(batch))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	per := map[string]float64{}
	s := bufio.NewScanner(strings.NewReader(string(out)))
	for s.Scan() {
		name, ns, ok := strings.Cut(s.Text(), "\t")
		if v, err := strconv.ParseFloat(ns, 64); ok && err == nil {
			per[name] = v
		}
	}
	for _, op := range uncontendedOps() {
		if _, ok := per[op.name]; !ok {
			return nil, fmt.Errorf("no figure for %s in %q", op.name, out)
		}
	}
	return per, nil
}

// uncontendedMain is -uncontended: one round of batch acquisitions of each
// uncontended op, printed as "name<TAB>ns per acquisition" lines.
func uncontendedMain(batch int) int {
	dir, err := os.MkdirTemp("", "hold-bench-uncontended-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	per, err := measureUncontended(dir, 1, batch)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, op := range uncontendedOps() {
		fmt.Printf("%s\t%d\n", op.name, per[op.name].Nanoseconds())
	}
	return 0
}

func median64(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// medianRatio64 is the median of a[i] / b[i].
func medianRatio64(a, b []float64) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return median64(r)
}

// commandLine is how this run was started, for the report.
func commandLine() string {
	s := "go run ."
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " '\"()$*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		s += " " + a
	}
	return s
}
