//go:build unix

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The listing rows time `hold ls DIR` and `hold status LOCK` as whole
// processes against `ls -l DIR` of the same directory, with K lock files
// of which half are held (by another process, with flock(2), the way
// flock(1) or Python's filelock hold them: no owner record, so hold must
// ask the kernel who holds each). A last pair of rows lists 10 locks while
// yet another process holds 5,000 flocks on unrelated files elsewhere: the
// kernel's lock table lists every lock on the machine.

// holdFilesMain is the holding process: it takes an exclusive flock on
// every file named on stdin (one path a line, ended by an empty line),
// says "ready", and holds them until stdin closes.
func holdFilesMain() int {
	in := bufio.NewReader(os.Stdin)
	var files []*os.File
	for {
		line, err := in.ReadString('\n')
		line = strings.TrimSuffix(line, "\n")
		if line == "" || err != nil {
			break
		}
		f, err := os.OpenFile(line, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench holder:", err)
			return 1
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			fmt.Fprintln(os.Stderr, "bench holder:", line, err)
			return 1
		}
		files = append(files, f)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, in)
	for _, f := range files {
		f.Close()
	}
	return 0
}

// holder is a running holdFilesMain.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// holdFiles starts a process of this executable that holds paths.
func holdFiles(self string, paths []string) (*holder, error) {
	cmd := exec.Command(self, "-holdfiles")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		w := bufio.NewWriter(stdin)
		for _, p := range paths {
			fmt.Fprintln(w, p)
		}
		fmt.Fprintln(w)
		w.Flush()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("the holding process did not start: %q %v", line, err)
	}
	return &holder{cmd: cmd, stdin: stdin}, nil
}

func (h *holder) stop() {
	h.stdin.Close()
	h.cmd.Wait()
}

// listingRow is one measured size.
type listingRow struct {
	what              string
	locks, held       int
	ls, holdLs, hStat []time.Duration
	// The same commands' CPU time (user + system), which a machine busy
	// with other work stretches less than the wall time.
	lsCPU, holdLsCPU, hStatCPU []time.Duration
}

// makeLocks makes k empty lock files in dir and returns the paths of the
// first half, the ones to hold.
func makeLocks(dir string, k int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var held []string
	for i := range k {
		p := filepath.Join(dir, fmt.Sprintf("l%05d.lock", i))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return nil, err
		}
		if i < k/2 {
			held = append(held, p)
		}
	}
	return held, nil
}

// measureListing times the listing rows; runs rounds each (fewer for the
// largest directory), the three commands taking turns.
func measureListing(self, holdBin string, sizes []int, runs int) ([]listingRow, error) {
	tmp, err := os.MkdirTemp("", "hold-bench-ls-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	time3 := func(r *listingRow, dir string, n int) error {
		// The target of the first lock file, which is held.
		status := filepath.Join(dir, "l00000")
		cmds := [][]string{{"ls", "-l", dir}, {holdBin, "ls", dir}, {holdBin, "status", status}}
		outs := []*[]time.Duration{&r.ls, &r.holdLs, &r.hStat}
		cpus := []*[]time.Duration{&r.lsCPU, &r.holdLsCPU, &r.hStatCPU}
		for i := 0; i < n+1; i++ {
			for j := range cmds {
				at := (i + j) % len(cmds)
				c := cmds[at]
				cmd := exec.Command(c[0], c[1:]...)
				start := time.Now()
				out, err := cmd.CombinedOutput()
				d := time.Since(start)
				// hold status exits 1 for a free lock, by design.
				if err != nil && !(at == 2 && cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 1) {
					return fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, out)
				}
				if i > 0 { // the first round warms the caches
					*outs[at] = append(*outs[at], d)
					*cpus[at] = append(*cpus[at], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
				}
			}
		}
		return nil
	}
	var rows []listingRow
	for _, k := range sizes {
		dir := filepath.Join(tmp, fmt.Sprintf("k%d", k))
		paths, err := makeLocks(dir, k)
		if err != nil {
			return nil, err
		}
		h, err := holdFiles(self, paths)
		if err != nil {
			return nil, err
		}
		r := listingRow{what: fmt.Sprintf("%d locks, %d held", k, len(paths)), locks: k, held: len(paths)}
		n := runs
		if k >= 10000 {
			n = max(3, runs/4)
		}
		err = time3(&r, dir, n)
		h.stop()
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	// 10 locks (5 held), while another process holds 5,000 flocks on
	// files elsewhere.
	dir := filepath.Join(tmp, "small")
	paths, err := makeLocks(dir, 10)
	if err != nil {
		return nil, err
	}
	var others []string
	odir := filepath.Join(tmp, "unrelated")
	os.MkdirAll(odir, 0o755)
	for i := range 5000 {
		others = append(others, filepath.Join(odir, fmt.Sprintf("u%05d", i)))
	}
	hu, err := holdFiles(self, others)
	if err != nil {
		return nil, err
	}
	defer hu.stop()
	h, err := holdFiles(self, paths)
	if err != nil {
		return nil, err
	}
	defer h.stop()
	r := listingRow{what: "10 locks, 5 held, and 5,000 unrelated flocks elsewhere", locks: 10, held: 5}
	if err := time3(&r, dir, runs); err != nil {
		return nil, err
	}
	return append(rows, r), nil
}

// writeListing writes the listing table.
func writeListing(w io.Writer, rows []listingRow) {
	fmt.Fprintf(w, "## `hold ls` and `hold status` against `ls -l` of the same directory\n\n")
	fmt.Fprintf(w, "Whole processes, taking turns; medians, and ratios as the median of per-round ratios, of the wall time and of the CPU time (user + system; on a shared machine the wall time of a process is stretched by the others, its CPU time much less; CPU times are counted in the kernel's ticks, so a ratio of a few ms is coarse). Half the lock files are held by another process with flock(2) (no owner record: hold asks the kernel who holds each).\n\n")
	fmt.Fprintf(w, "| directory | rounds | `ls -l` | `hold ls` | `hold ls` / `ls -l` | `hold status` (one held lock) | `hold status` / `ls -l` | CPU: `ls -l` | `hold ls` | ratio | `hold status` | ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %.2f | %s | %.2f | %s | %s | %.2f | %s | %.2f |\n", r.what, len(r.ls),
			fmtDur(median(r.ls)), fmtDur(median(r.holdLs)), medianRatio(r.holdLs, r.ls),
			fmtDur(median(r.hStat)), medianRatio(r.hStat, r.ls),
			fmtDur(median(r.lsCPU)), fmtDur(median(r.holdLsCPU)), medianRatio(r.holdLsCPU, r.lsCPU),
			fmtDur(median(r.hStatCPU)), medianRatio(r.hStatCPU, r.lsCPU))
	}
	fmt.Fprintln(w)
}

// listingMain runs the listing rows alone and writes them to
// out/listing.md (and stdout).
// holdBin, when set, is the hold to time instead of one built from the
// parent module (to compare two versions).
func listingMain(self, out, holdBin string, quick bool) error {
	tmp, err := os.MkdirTemp("", "hold-bench-ls-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if holdBin == "" {
		if holdBin, err = buildHold(tmp); err != nil {
			return err
		}
	}
	sizes, runs := []int{10, 1000, 10000}, 12
	if quick {
		sizes, runs = []int{10, 1000}, 3
	}
	rows, err := measureListing(self, holdBin, sizes, runs)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `cd bench && go run . -listing` (%s UTC); load average %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04"), loadAverage())
	writeListing(&b, rows)
	os.Stdout.WriteString(b.String())
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "listing.md"), []byte(b.String()), 0o644)
}
