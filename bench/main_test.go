//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// TestMain lets the test binary serve as the suite's worker and flock(1)
// child, as the suite re-runs its own executable for them.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "-worker" || os.Args[1] == "-cs" || os.Args[1] == "-echo" || os.Args[1] == "-uncontended") {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestSuiteSmoke runs every implementation briefly with two workers and
// checks that nothing was lost and both outputs were written.
func TestSuiteSmoke(t *testing.T) {
	out := t.TempDir()
	if err := runSuite(&suiteEnv{}, out, []int{2}, impls(), 40, 2, time.Second, true, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 2 | hold |", "| 2 | hold fair |", "| 2 | flock(2) |", "## Goals",
		"## Headline", "| uncontended Acquire+Release, in process", "| hand-offs/s, 2 processes",
		"| `hold run T -- true`, whole process", "| the same against the floor", "| `hold update small.json -- cat`, against the floor"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("results.md lacks %q:\n%s", want, b)
		}
	}
	if node, _ := findNode(""); node != nil {
		node.cleanup()
		for _, want := range []string{"| 2 | proper-lockfile seed |", "| 2 | proper-lockfile retry |", "## Portable protocol against proper-lockfile",
			"| 2 | hold (Node) |", "## hold's Node package against proper-lockfile",
			"| 2 | hold (Node sync) |", "## hold's synchronous Node API against proper-lockfile",
			"| 2 | proper-lockfile drop-in seed |", "## hold's proper-lockfile drop-in against proper-lockfile",
			"the Node processes' own, from process.cpuUsage(), plus their hold agents'", "| N | implementation | CPU per cycle | of which the agent |"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("results.md lacks %q:\n%s", want, b)
			}
		}
	}
	if py, _ := findPython(); py != nil {
		py.cleanup()
		for _, want := range []string{"| 2 | filelock |", "| 2 | hold (Python) |", "| 2 | hold.filelock |", "## hold's Python package against filelock",
			"| N | row | time per cycle | / filelock's | CPU per cycle | of which the agent |"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("results.md lacks %q:\n%s", want, b)
			}
		}
	}
	svg, err := os.ReadFile(filepath.Join(out, "waits.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(svg), "<svg") {
		t.Errorf("waits.svg is not an SVG")
	}
}

func TestPercentile(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := percentile(d, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

// TestHandoffs: only acquisitions by another process than the previous
// holder count, ordered by when they were made, timed from the previous
// holder's release.
func TestHandoffs(t *testing.T) {
	acqs := []acquisition{
		{worker: 1, got: 300, releasing: 310},
		{worker: 0, got: 100, releasing: 110},
		{worker: 0, got: 200, releasing: 210},
		{worker: 1, got: 400, releasing: 420},
		{worker: 0, got: 425, releasing: 430},
	}
	n, lat := handoffs(acqs)
	if n != 2 || len(lat) != 2 || lat[0] != 90 || lat[1] != 5 {
		t.Fatalf("handoffs = %d %v, want 2 [90 5]", n, lat)
	}
}

// TestBaselineBuildsAgainstOldestRevision builds the suite against the
// oldest revision the comparison is meant for (newapi.go): rows that use a
// newer API must stay behind the hold_baseline tag, or -baseline 8a1b227
// stops building.
func TestBaselineBuildsAgainstOldestRevision(t *testing.T) {
	const rev = "8a1b227"
	if _, err := exec.LookPath("git"); err != nil {
		testenv.MissingTool(t, "git", "building the suite against a revision of hold")
	}
	if err := exec.Command("git", "-C", "..", "rev-parse", "--verify", "--quiet", rev+"^{commit}").Run(); err != nil {
		testenv.MissingTool(t, "a git clone of hold with revision "+rev, "building the suite against that revision")
	}
	if _, _, err := buildBaseline(t.TempDir(), rev); err != nil {
		t.Fatal(err)
	}
}

// TestBaselineSmoke builds the suite against hold at HEAD and runs the
// baseline comparison briefly: every row gets its figures from both
// builds and the report is written. (It checks the report's shape only:
// its ratios are timings.)
func TestBaselineSmoke(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.MissingTool(t, "git", "building the suite against a revision of hold")
	}
	if err := exec.Command("git", "-C", "..", "rev-parse", "--verify", "HEAD").Run(); err != nil {
		testenv.MissingTool(t, "a git checkout of hold", "building the suite against a revision of hold")
	}
	out := t.TempDir()
	if err := runBaseline(&suiteEnv{}, out, "HEAD", []int{2}, "hold,gofrs/flock", 40, 2, time.Second, 200); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "baseline.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| row | current | baseline | current / baseline |", "| uncontended hold |", "| uncontended gofrs/flock |",
		"| N=2 hold |", "| N=2 gofrs/flock |", "| N=2 hold / gofrs/flock |", "2 rounds"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("baseline.md lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "| 0 |") || strings.Contains(string(b), "| 0 ns |") {
		t.Errorf("a row has no figure:\n%s", b)
	}
}
