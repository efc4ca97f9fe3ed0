//go:build unix

package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The Node rows run bench/node/worker.js with npm's proper-lockfile, the
// lock the seed implementations use, as the baseline the portable protocol
// is measured against on the same work, machine and filesystem.

//go:embed node/worker.js
var nodeWorker []byte

// properLockfileVersion is the version the baseline is pinned to (the one
// the interop tests use).
const properLockfileVersion = "4.1.2"

// defaultNodeModules is where CI installs proper-lockfile for the interop
// tests, relative to the bench directory (where `go run .` and `go test`
// run); the suite reuses it.
const defaultNodeModules = "../internal/dirlock/testdata/node/node_modules"

// nodeHoldMode and nodeHoldSyncMode are the worker modes of the "hold
// (Node)" and "hold (Node sync)" rows: the Node package in js/, async and
// synchronous, with a hold built from this tree as its agent.
// nodeDropInSeedMode is the "proper-lockfile drop-in seed" row's: the
// "proper-lockfile seed" row's code with its import switched to the
// package's proper-lockfile drop-in.
const (
	nodeHoldMode       = "hold"
	nodeHoldSyncMode   = "hold-sync"
	nodeDropInSeedMode = "hold-drop-in-seed"
)

// usesHoldJS reports whether a Node worker mode runs the Node package.
func usesHoldJS(mode string) bool {
	return mode == nodeHoldMode || mode == nodeHoldSyncMode || mode == nodeDropInSeedMode
}

// nodeSetup is a Node and a proper-lockfile install to run workers with.
type nodeSetup struct {
	bin     string
	modules string // absolute node_modules directory
	tmp     string // holds the worker script (and hold, for the Node package)
	script  string
	// holdBin and holdJS are the hold executable and the Node package's
	// entry point, for the "hold (Node)" row (see buildHold).
	holdBin, holdJS string
}

// buildHold builds the hold command from the parent module into the
// setup's directory, for the Node package's agent. It returns why it
// could not, or "".
func (n *nodeSetup) buildHold() string {
	root, err := filepath.Abs("..")
	if err != nil {
		return err.Error()
	}
	js := filepath.Join(root, "js", "index.js")
	if _, err := os.Stat(js); err != nil {
		return "the Node package (../js/index.js) not found"
	}
	build := exec.Command("go", "build", "-o", n.tmp+string(filepath.Separator), "./cmd/hold")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Sprintf("building hold for the Node package: %v: %s", err, out)
	}
	n.holdBin, n.holdJS = filepath.Join(n.tmp, "hold"), js
	return ""
}

func needsNode(list []impl) bool {
	for _, im := range list {
		if im.node != "" {
			return true
		}
	}
	return false
}

// findNode finds node and proper-lockfile at the pinned version: in
// modules if given, else $HOLD_BENCH_NODE_MODULES, else the interop tests'
// install. It returns nil and the reason when either is missing.
func findNode(modules string) (*nodeSetup, string) {
	bin, err := exec.LookPath("node")
	if err != nil {
		return nil, "node not found"
	}
	if modules == "" {
		modules = os.Getenv("HOLD_BENCH_NODE_MODULES")
	}
	if modules == "" {
		modules = defaultNodeModules
	}
	modules, err = filepath.Abs(modules)
	if err != nil {
		return nil, err.Error()
	}
	raw, err := os.ReadFile(filepath.Join(modules, "proper-lockfile", "package.json"))
	if err != nil {
		return nil, fmt.Sprintf("proper-lockfile not installed in %s (npm install --prefix internal/dirlock/testdata/node proper-lockfile@%s)", modules, properLockfileVersion)
	}
	var pkg struct{ Version string }
	if json.Unmarshal(raw, &pkg) != nil || pkg.Version != properLockfileVersion {
		return nil, fmt.Sprintf("proper-lockfile in %s is %q, not %s", modules, pkg.Version, properLockfileVersion)
	}
	tmp, err := os.MkdirTemp("", "hold-bench-node-")
	if err != nil {
		return nil, err.Error()
	}
	script := filepath.Join(tmp, "worker.js")
	if err := os.WriteFile(script, nodeWorker, 0o644); err != nil {
		os.RemoveAll(tmp)
		return nil, err.Error()
	}
	return &nodeSetup{bin: bin, modules: modules, tmp: tmp, script: script}, ""
}

func (n *nodeSetup) cleanup() { os.RemoveAll(n.tmp) }

// command runs one Node worker in mode on the run directory dir.
func (n *nodeSetup) command(mode, dir string, m int, budget time.Duration) *exec.Cmd {
	cmd := exec.Command(n.bin, n.script, mode, dir, strconv.Itoa(m), strconv.FormatInt(budget.Milliseconds(), 10))
	cmd.Env = append(os.Environ(), "NODE_PATH="+n.modules)
	if usesHoldJS(mode) {
		cmd.Env = append(cmd.Env, "HOLD_BIN="+n.holdBin, "HOLD_JS="+n.holdJS)
	}
	return cmd
}

// leaveOut drops the implementations drop selects, saying why on stderr
// and in the results.
func (se *suiteEnv) leaveOut(list []impl, why string, drop func(impl) bool) []impl {
	var kept []impl
	for _, im := range list {
		if drop(im) {
			note := fmt.Sprintf("%s left out: %s", im.name, why)
			fmt.Fprintln(os.Stderr, "bench:", note)
			se.notes = append(se.notes, note)
			continue
		}
		kept = append(kept, im)
	}
	return kept
}

// writeNodeHeadline writes the headline's Node rows when the run has
// them: the Node package's uncontended cycle (N = 1) against
// proper-lockfile's in the same run, lock() + release() against its
// lock() + release() (the retry row), and lockSync() + releaseSync()
// against its lockSync() + unlockSync() (the seed row, which never
// sleeps uncontended), each with its CPU per cycle (the agent's
// included).
func writeNodeHeadline(b *strings.Builder, results []*result) {
	for _, row := range []struct {
		subject, peer, what, peerWhat, goal string
		max                                 float64
	}{
		{"hold (Node)", "proper-lockfile retry", "Node `lock()` + `release()`, uncontended (N = 1): time per cycle (CPU per cycle)",
			"proper-lockfile `lock()` + release", "≤ 0.33 (3× faster)", 1.0 / 3},
		{"hold (Node sync)", "proper-lockfile seed", "Node `lockSync()` + `releaseSync()`, the same",
			"proper-lockfile `lockSync()` + release", "≤ 1", 1},
	} {
		h, p := find(results, 1, row.subject), find(results, 1, row.peer)
		if h == nil || p == nil || h.acquired == 0 || p.acquired == 0 {
			continue
		}
		cycle := func(r *result) time.Duration { return r.elapsed / time.Duration(r.acquired) }
		cpu := func(r *result) time.Duration { return r.cpu / time.Duration(r.acquired) }
		r := ratio(cycle(h), cycle(p))
		fmt.Fprintf(b, "| %s | %s (%s) | %s %s (%s) | %.2f | %s: %s |\n", row.what,
			fmtDur(cycle(h)), fmtDur(cpu(h)), row.peerWhat, fmtDur(cycle(p)), fmtDur(cpu(p)), r, row.goal, verdict(r <= row.max))
	}
}
