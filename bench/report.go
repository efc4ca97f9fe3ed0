//go:build unix

package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// percentile returns the p-th percentile (nearest rank) of d; p = 100 is
// the maximum.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := sorted(d)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func sorted(d []time.Duration) []time.Duration {
	if slices.IsSorted(d) {
		return d
	}
	slices.Sort(d)
	return d
}

// fmtDur prints a duration with three significant digits in µs or ms.
func fmtDur(d time.Duration) string {
	us := float64(d) / 1e3
	switch {
	case us < 10:
		return fmt.Sprintf("%.1f µs", us)
	case us < 1000:
		return fmt.Sprintf("%.0f µs", us)
	case us < 10000:
		return fmt.Sprintf("%.2f ms", us/1e3)
	case us < 1e6:
		return fmt.Sprintf("%.1f ms", us/1e3)
	}
	return fmt.Sprintf("%.2f s", us/1e6)
}

func find(results []*result, n int, name string) *result {
	for _, r := range results {
		if r.n == n && r.impl.name == name {
			return r
		}
	}
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// machine describes where the run happened.
func machine() string {
	var u unix.Utsname
	kernel := "unknown"
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	return fmt.Sprintf("%s, %d CPUs, %s, %s/%s", kernel, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func writeTable(path string, head *headline, results []*result, list []impl, counts []int, cmdline, load string, notes []string, took time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# hold benchmark results\n\n")
	fmt.Fprintf(&b, "Command: `cd bench && %s` (took %s, %s).  \n", cmdline, took.Round(time.Second), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Machine: %s; %s.\n\n", machine(), load)
	for _, note := range notes {
		fmt.Fprintf(&b, "Note: %s.\n\n", note)
	}
	writeHeadline(&b, head, results, counts)
	fmt.Fprintf(&b, "## Every implementation\n\n")
	fmt.Fprintf(&b, "Each row: N worker processes take one lock in a loop around a tiny critical section ")
	fmt.Fprintf(&b, "(read a 20-digit counter and write it back incremented, in place). ")
	fmt.Fprintf(&b, "*Wait* is from asking for the lock to holding it; *hold* from holding it to the release returning. ")
	fmt.Fprintf(&b, "*Hand-offs/s* is acquisitions over the run's wall time. *Lost* is acquisitions minus the final counter: must be 0.\n\n")
	fmt.Fprintf(&b, "| N | implementation | acquisitions | hand-offs/s | lost | wait p50 | wait p99 | wait max | hold p50 |\n")
	fmt.Fprintf(&b, "|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range counts {
		for _, im := range list {
			r := find(results, n, im.name)
			if r == nil {
				continue
			}
			fmt.Fprintf(&b, "| %d | %s | %d | %.0f | %d | %s | %s | %s | %s |\n", n, im.name, r.acquired, r.handoffsPerSec(), r.lost,
				fmtDur(percentile(r.waits, 50)), fmtDur(percentile(r.waits, 99)), fmtDur(percentile(r.waits, 100)),
				fmtDur(percentile(r.holds, 50)))
		}
	}
	fmt.Fprintf(&b, "\n## Goals (ratios within this run)\n\n")
	fmt.Fprintf(&b, "- Fair wait bound: p99 wait ≤ 2·(N−1)·(median hold time of the fair run), max wait ≤ 3× that bound; for N = 8 and 30.\n")
	fmt.Fprintf(&b, "- Fair hand-offs ≥ 0.6 × plain hold; plain hold hand-offs ≥ 0.8 × flock(2) with its per-acquisition open.\n")
	fmt.Fprintf(&b, "- The hand-off interval (wall time per acquisition) is shown too: in a FIFO a waiter waits for N−1 hand-offs, ")
	fmt.Fprintf(&b, "so p99 / ((N−1) · interval) near 1 means the wait is what the order costs and no more.\n\n")
	fmt.Fprintf(&b, "| N | fair hold p50 | bound 2(N−1)·hold | fair p99 | p99 goal | fair max | max goal (3×bound) | fair p99 / ((N−1)·interval) | fair/plain hand-offs | goal ≥ 0.6 | plain/flock(2) hand-offs | goal ≥ 0.8 |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---|---:|---|---:|---:|---|---:|---|\n")
	for _, n := range counts {
		fair, plain, raw := find(results, n, "hold fair"), find(results, n, "hold"), find(results, n, "flock(2)")
		if fair == nil || plain == nil || raw == nil {
			continue
		}
		hold50 := percentile(fair.holds, 50)
		bound := time.Duration(2 * (n - 1) * int(hold50))
		p99, mx := percentile(fair.waits, 99), percentile(fair.waits, 100)
		p99goal, maxgoal := "—", "—"
		if n == 8 || n == 30 {
			p99goal = fmt.Sprintf("%s (%.1f×)", verdict(p99 <= bound), ratio(p99, bound))
			maxgoal = fmt.Sprintf("%s (%.1f×)", verdict(mx <= 3*bound), ratio(mx, 3*bound))
		}
		interval := time.Duration(float64(fair.elapsed) / float64(max(fair.acquired, 1)))
		perHandoff := "—"
		if n > 1 {
			perHandoff = fmt.Sprintf("%.2f", ratio(p99, time.Duration(n-1)*interval))
		}
		fp := fair.handoffsPerSec() / plain.handoffsPerSec()
		pr := plain.handoffsPerSec() / raw.handoffsPerSec()
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %.2f | %s | %.2f | %s |\n", n, fmtDur(hold50), fmtDur(bound),
			fmtDur(p99), p99goal, fmtDur(mx), maxgoal, perHandoff, fp, verdict(fp >= 0.6), pr, verdict(pr >= 0.8))
	}
	writeAgainstProperLockfile(&b, results, counts, "hold portable", "Portable protocol against proper-lockfile",
		"Goal: ≥ 10×, and a median hand-off under 1 ms.")
	writeAgainstProperLockfile(&b, results, counts, "hold (Node)", "hold's Node package against proper-lockfile",
		"Goals: at N = 1 (uncontended lock() + release()) ≥ 3× proper-lockfile retry's acquisitions/s (its asynchronous lock(), the call a Node program makes); at N = 8 ≥ 10× its hand-offs/s.")
	writeAgainstProperLockfile(&b, results, counts, "hold (Node sync)", "hold's synchronous Node API against proper-lockfile",
		"The synchronous calls (lockSync() + releaseSync()) beside the async ones, against the same baselines; the seeds' callers are synchronous.")
	writeAgainstProperLockfile(&b, results, counts, "proper-lockfile drop-in seed", "hold's proper-lockfile drop-in against proper-lockfile",
		"proper-lockfile seed's code unchanged but for its import, now @hold-dev/hold/proper-lockfile: lockSync() + release on the same <file>.lock directory. Goal (issue 43): at N = 1 at least ×seed 1, a cycle no slower than proper-lockfile's lockSync + unlockSync.")
	writeAgainstFilelock(&b, results, counts)
	fmt.Fprintf(&b, "\nChart: [waits.svg](waits.svg), the distribution of waits per implementation (log scale).\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}

// chartQuantiles are the points of each distribution the chart draws:
// every percent, then finer steps into the tail, then the maximum.
func chartQuantiles() []float64 {
	var q []float64
	for p := 1.0; p < 99; p++ {
		q = append(q, p)
	}
	return append(q, 99, 99.5, 99.8, 99.9, 99.95, 99.99, 100)
}

// writeChart draws one panel per worker count: for each implementation,
// the share of waits at or below a given time (x, log scale).
func writeChart(path string, results []*result, list []impl, counts []int, png bool) error {
	var plots []*plot.Plot
	// The legend gets a panel of its own, so that it hides no line.
	legend := plot.New()
	legend.HideAxes()
	legend.Legend.Top = true
	legend.Legend.Left = true
	legend.Legend.TextStyle.Font.Size = vg.Points(11)
	legend.Title.Text = "implementation"
	for j, n := range counts {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("N = %d processes", n)
		p.X.Label.Text = "wait (µs, log scale)"
		p.Y.Label.Text = "share of acquisitions waiting ≤ x"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min, p.Y.Max = 0, 1
		p.Add(plotter.NewGrid())
		for i, im := range list {
			r := find(results, n, im.name)
			if r == nil || len(r.waits) == 0 {
				continue
			}
			var pts plotter.XYs
			for _, q := range chartQuantiles() {
				us := float64(percentile(r.waits, q)) / 1e3
				pts = append(pts, plotter.XY{X: math.Max(us, 0.1), Y: q / 100})
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			line.Color = plotutil.Color(i)
			line.Width = vg.Points(1.5)
			line.Dashes = plotutil.Dashes(i % 4)
			if im.name == "hold fair" {
				line.Width = vg.Points(3)
				line.Dashes = nil
			}
			p.Add(line)
			if j == 0 {
				legend.Legend.Add(im.name, line)
			}
		}
		plots = append(plots, p)
	}
	plots = append(plots, legend)
	width := vg.Length(len(plots)) * 3.6 * vg.Inch
	height := 4 * vg.Inch
	canvas := vgsvg.New(width, height)
	if err := drawPanels(canvas, plots); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if !png {
		return nil
	}
	img := vgimg.PngCanvas{Canvas: vgimg.New(width, height)}
	if err := drawPanels(img, plots); err != nil {
		return err
	}
	pf, err := os.Create(strings.TrimSuffix(path, ".svg") + ".png")
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(pf); err != nil {
		pf.Close()
		return err
	}
	return pf.Close()
}

// drawPanels draws the plots side by side on c.
func drawPanels(c vg.CanvasSizer, plots []*plot.Plot) error {
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 3,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for j, p := range plots {
		p.Draw(canvases[0][j])
	}
	return nil
}

// writeAgainstProperLockfile compares subject with proper-lockfile, the
// lock of the seed implementations, on the same work in this run: hold's
// portable protocol (goal: at least 10× the seed's throughput, and a median
// hand-off under 1 ms where inotify works), and hold's Node package.
func writeAgainstProperLockfile(b *strings.Builder, results []*result, counts []int, subject, heading, goal string) {
	names := []string{subject, "proper-lockfile seed", "proper-lockfile retry"}
	var rows []*result
	for _, n := range counts {
		for _, name := range names {
			if r := find(results, n, name); r != nil {
				rows = append(rows, r)
			}
		}
	}
	if len(rows) == 0 || find(results, counts[0], subject) == nil && find(results, counts[len(counts)-1], subject) == nil {
		return
	}
	fmt.Fprintf(b, "\n## %s (ratios within this run)\n\n", heading)
	fmt.Fprintf(b, "A *hand-off* here is an acquisition by another process than the previous holder; its latency runs ")
	fmt.Fprintf(b, "from the previous holder beginning to release (its critical section done) to the next one holding the lock. ")
	fmt.Fprintf(b, "*×seed* and *×retry* are %s's rates over proper-lockfile seed's and retry's. %s\n\n", subject, goal)
	fmt.Fprintf(b, "| N | implementation | acquisitions/s | hand-offs/s | median hand-off | p99 hand-off | ×seed acquisitions/s | ×seed hand-offs/s | ×retry acquisitions/s | ×retry hand-offs/s |\n")
	fmt.Fprintf(b, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	ratio := func(a, b float64) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f", a/b)
	}
	for _, r := range rows {
		cols := []string{"—", "—", "—", "—"}
		if r.impl.name == subject {
			for i, base := range []string{"proper-lockfile seed", "proper-lockfile retry"} {
				if o := find(results, r.n, base); o != nil {
					cols[2*i] = ratio(r.handoffsPerSec(), o.handoffsPerSec())
					cols[2*i+1] = ratio(r.trueHandoffsPerSec(), o.trueHandoffsPerSec())
				}
			}
		}
		fmt.Fprintf(b, "| %d | %s | %.0f | %.0f | %s | %s | %s |\n", r.n, r.impl.name, r.handoffsPerSec(), r.trueHandoffsPerSec(),
			fmtDur(percentile(r.handoffLat, 50)), fmtDur(percentile(r.handoffLat, 99)), strings.Join(cols, " | "))
	}
	if subject == "hold portable" {
		return // Go workers: no CPU figures
	}
	fmt.Fprintf(b, "\nCPU time per acquisition over the measured cycles (the Node processes' own, from process.cpuUsage(), plus their hold agents', from /proc/PID/stat; *×seed* and *×retry*: %s's CPU per cycle over theirs, lower is better):\n\n", subject)
	fmt.Fprintf(b, "| N | implementation | CPU per cycle | of which the agent | CPUs busy (CPU / wall) | ×seed CPU | ×retry CPU |\n|---:|---|---:|---:|---:|---:|---:|\n")
	per := func(x *result) float64 {
		if x == nil || x.acquired == 0 {
			return 0
		}
		return float64(x.cpu) / float64(x.acquired)
	}
	for _, r := range rows {
		cols := []string{"—", "—"}
		if r.impl.name == subject {
			for i, base := range []string{"proper-lockfile seed", "proper-lockfile retry"} {
				if o := per(find(results, r.n, base)); o > 0 {
					cols[i] = fmt.Sprintf("%.2f", per(r)/o)
				}
			}
		}
		busy := 0.0
		if r.elapsed > 0 {
			busy = float64(r.cpu) / float64(r.elapsed)
		}
		agent := time.Duration(0)
		if r.acquired > 0 {
			agent = r.agentCPU / time.Duration(r.acquired)
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %.2f | %s |\n", r.n, r.impl.name, fmtDur(time.Duration(per(r))), fmtDur(agent), busy, strings.Join(cols, " | "))
	}
}
