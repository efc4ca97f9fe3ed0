package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// clientRules are the lock decisions the Node and Python clients once made
// for themselves and that the agent now makes for them (locks.go's attempt
// and busy memory, sync.go's queueing, sync_unix.go's poll budget, and
// the library's staleness rule, internal/dirlock/judge.go, which a status
// request's "stale" reaches): the memory of busy locks, the test of
// whether a target is a network address, a poll budget of the client's
// own choosing, and a lock judged stale by its time stamp. Each pattern
// is what a copy of such a rule looks like in either language.
var clientRules = []struct {
	rule    string
	pattern *regexp.Regexp
}{
	{"a memory of busy locks", regexp.MustCompile(`(?i)busy_?memory|recently_?busy|mark_?busy|busy_?key`)},
	{"a test of whether a target is a network address", regexp.MustCompile(`(?i)is_?address|['"]://['"]`)},
	{"a poll budget chosen by the client", regexp.MustCompile(`SPIN_MS|availableParallelism|cpus\(\)\.length|os\.cpu_count|sched_getaffinity`)},
	{"a staleness rule (a lock judged by its time stamp's age)", regexp.MustCompile(`(?i)mtime\S*\s*[<>]|(Date\.now\(\)|time\.time\(\))\s*-\s*\S*(mtime|stale)|is_?(lock_?)?stale\b`)},
}

// TestClientsCarryTransportOnly fails when a client of the agent grows
// one of the agent's rules back: the rule would then have two homes, and
// the copies drift (they did, before the agent decided for them).
func TestClientsCarryTransportOnly(t *testing.T) {
	files, err := filepath.Glob("../../python/src/hold/*.py")
	if err != nil {
		t.Fatal(err)
	}
	// Subpackages (hold.filelock) are clients too.
	sub, err := filepath.Glob("../../python/src/hold/*/*.py")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, sub...)
	js, err := filepath.Glob("../../js/*.cjs")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, js...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, r := range clientRules {
				if r.pattern.MatchString(line) {
					t.Errorf("%s:%d: %s belongs behind the agent (internal/agent, and the library it calls), not in its client: %s", f, i+1, r.rule, strings.TrimSpace(line))
				}
			}
		}
	}
	for _, want := range []string{"../../js/index.cjs", "../../js/proper-lockfile.cjs", "../../python/src/hold/filelock/__init__.py"} {
		if want = filepath.FromSlash(want); !slices.Contains(files, want) {
			t.Fatalf("%s is not among %v: the clients moved?", want, files)
		}
	}
}
