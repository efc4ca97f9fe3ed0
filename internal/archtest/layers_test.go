package archtest

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// module is the module's import path; short names below are relative to it.
const module = "github.com/hold-dev/hold"

// The layers, by package (relative to the module, "" for the root). Any
// package of the module not named here is of the library: the root, a
// protocol, or an internal package they use. A new front end must be added
// to frontEnds, or the rules below will take it for library code that
// imports a front end.
var (
	// frontEnds act on what the library decides: the command line, the
	// agent, their shared request code and error kinds, the companions'
	// scheme registrations, and the commands.
	frontEnds = []string{
		"internal/cli", "internal/agent", "internal/lockspec", "internal/errkind",
		"internal/report", "internal/gnuflag", "internal/etcdcli", "internal/pgcli",
		"cmd/hold", "cmd/hold-remote", "cmd/hold-postgres",
	}
	// tools are public packages on top of the library that the root must
	// not link: a program that does not call them does not pay for them.
	tools = []string{"doctor", "flock"}
	// testSupport is imported by tests only.
	testSupport = []string{
		"holdtest", "internal/testenv", "internal/faultnet", "internal/doctest",
		"internal/archtest", "etcd/etcdtest", "postgres/pgtest", "internal/slottest",
		"internal/cycletest",
	}
	// implementations are the library's internals that hold its rules (the
	// kernel lock, the fair queue, the directory lock, the guarded update,
	// the owner record, lock paths and named-lock places, filesystem
	// identification, scheduling). Front ends reach them through the root
	// API; doctor probes some of them by design.
	implementations = []string{
		"internal/flock", "internal/fairq", "internal/dirlock", "internal/atomicfile",
		"internal/lockpath", "internal/nameddir", "internal/fsinfo",
		"internal/resched", "internal/deadlock",
	}
	// rootOnly are implementations that only the root package calls: the
	// deadlock checks and search sit below the root, which keeps their
	// options and their error, and no protocol or front end asks them.
	rootOnly = []string{"internal/deadlock"}
)

// knownReaches are the front ends' imports of implementation packages that
// are still to be replaced by root API calls (issue 33). The test fails on
// any reach not listed here; an entry no longer needed is reported in the
// log so that it can be deleted.
var knownReaches = map[string][]string{
	"internal/cli": {
		"internal/atomicfile", // append and update stream the file themselves
		"internal/dirlock",    // man page variables; ls knows gate and guard names
		"internal/fairq",      // ls knows queue files
		"internal/flock",      // run --fd locks a descriptor it was given
		"internal/lockpath",   // status, ls and completion go from lock path to target
		"internal/nameddir",   // ls and status list named locks
	},
	"internal/agent": {
		"internal/atomicfile", // update and append write the file themselves
		"internal/flock",      // recipes for a client's in-process kernel locks, and their records
	},
}

// direct are the only packages of the module that errkind and lockspec may
// import: they sit on the root API. Beside it, lockspec uses proc, the
// process facts every layer shares (the check that a descriptor is left
// for the runtime's timers before a wait arms one, and the caller a
// request is made for); guard, what a guarded write refuses up front and
// how it labels file errors, shared with the root; lockpath and portable
// for a directory lock found where another protocol was asked for
// (InspectAny). No other protocol: what a protocol has to say (a fair
// waiter stopped at its turn) comes through lock.Status.
var direct = map[string][]string{
	"internal/errkind": {""},
	"internal/lockspec": {"", "lock", "internal/errkind", "internal/proc", "internal/guard",
		"internal/lockpath", "portable"},
}

// protocols are the packages that take and release locks, public and
// internal. A front end's spec (lockspec) imports none but portable
// (whose directory locks InspectAny recognises), and that one only by
// name in direct above: TestLockspecImportsNoProtocol keeps it so.
var protocols = []string{"internal/flock", "internal/fairq", "internal/dirlock", "etcd", "postgres"}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// rel returns p relative to the module ("" for the root), and whether p
// is in the module.
func rel(p string) (string, bool) {
	if p == module {
		return "", true
	}
	r, ok := strings.CutPrefix(p, module+"/")
	return r, ok
}

func name(r string) string {
	if r == "" {
		return "the root package hold"
	}
	return r
}

// lists keeps each system's go list, run once per test binary: GOOS ->
// func() (map[string]*pkg, error).
var lists sync.Map

// list runs go list over the module for goos (imports are per system,
// through build constraints) and returns its packages by relative path.
func list(t *testing.T, goos string) map[string]*pkg {
	t.Helper()
	goTool := testenv.LookPath(t, "go", "the go command is not on PATH")
	f, _ := lists.LoadOrStore(goos, sync.OnceValues(func() (map[string]*pkg, error) {
		cmd := exec.Command(goTool, "list", "-e", "-json=ImportPath,Imports,Deps", module+"/...")
		cmd.Dir = moduleRoot()
		cmd.Env = append(os.Environ(), "GOOS="+goos)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, &listError{err, stderr.String()}
		}
		pkgs := map[string]*pkg{}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			p := new(pkg)
			if err := dec.Decode(p); err == io.EOF {
				break
			} else if err != nil {
				return nil, err
			}
			if r, ok := rel(p.ImportPath); ok {
				pkgs[r] = p
			}
		}
		return pkgs, nil
	}))
	pkgs, err := f.(func() (map[string]*pkg, error))()
	if err != nil {
		t.Fatalf("go list (GOOS=%s): %v", goos, err)
	}
	if len(pkgs) < 10 || pkgs[""] == nil || pkgs["lock"] == nil {
		t.Fatalf("go list (GOOS=%s) listed too little to judge: %d packages", goos, len(pkgs))
	}
	return pkgs
}

type listError struct {
	err    error
	stderr string
}

func (e *listError) Error() string { return e.err.Error() + "\n" + e.stderr }

// moduleRoot is the directory of go.mod: this package is internal/archtest.
func moduleRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

// systems are the systems whose imports are checked: each file's build
// constraints select different imports.
var systems = []string{"linux", "darwin", "windows"}

// moduleImports returns p's imports within the module, relative.
func moduleImports(p *pkg) []string {
	var out []string
	for _, i := range p.Imports {
		if r, ok := rel(i); ok {
			out = append(out, r)
		}
	}
	return out
}

func layerOf(r string) string {
	switch {
	case slices.Contains(frontEnds, r):
		return "front end"
	case slices.Contains(tools, r):
		return "tool"
	case slices.Contains(testSupport, r):
		return "test support"
	}
	return "library"
}

// TestImportsRunOneWay checks the layers: the library (the root, the
// protocols, their internals) imports no front end, tool or test support;
// nothing below the root imports the root; lock, the contract, imports
// nothing of the module.
func TestImportsRunOneWay(t *testing.T) {
	for _, goos := range systems {
		pkgs := list(t, goos)
		for _, r := range sortedKeys(pkgs) {
			p := pkgs[r]
			if layerOf(r) != "library" {
				continue
			}
			for _, i := range moduleImports(p) {
				switch {
				case r == "lock":
					t.Errorf("GOOS=%s: lock imports %s; the contract imports nothing of the module", goos, name(i))
				case layerOf(i) != "library":
					t.Errorf("GOOS=%s: %s imports %s, a %s: the library must not depend on what is built on it (if %s is a front end, add it to frontEnds)",
						goos, name(r), i, layerOf(i), name(r))
				case i == "" && r != "":
					t.Errorf("GOOS=%s: %s imports the root package, which sits above it", goos, name(r))
				}
			}
		}
	}
}

// TestFrontEndsUseTheLibrary checks that front ends reach the library
// through its public packages, not its implementation: errkind and
// lockspec import only what direct allows, and the other front ends no
// implementation package beyond knownReaches.
func TestFrontEndsUseTheLibrary(t *testing.T) {
	used := map[string]bool{}
	for _, goos := range systems {
		pkgs := list(t, goos)
		for _, r := range sortedKeys(pkgs) {
			if layerOf(r) != "front end" {
				continue
			}
			for _, i := range moduleImports(pkgs[r]) {
				if allowed, ok := direct[r]; ok {
					if !slices.Contains(allowed, i) {
						t.Errorf("GOOS=%s: %s imports %s; it sits on the root API (allowed: %s)", goos, r, i, names(allowed))
					}
					continue
				}
				if !slices.Contains(implementations, i) {
					continue
				}
				if slices.Contains(knownReaches[r], i) {
					used[r+" "+i] = true
					continue
				}
				t.Errorf("GOOS=%s: %s imports %s, an implementation package: call the root API (add a documented root function if it lacks one)", goos, r, i)
			}
		}
	}
	for r, is := range knownReaches {
		for _, i := range is {
			if !used[r+" "+i] {
				t.Logf("knownReaches lists %s -> %s, which no longer happens: delete the entry", r, i)
			}
		}
	}
}

// TestLockspecImportsNoProtocol checks that lockspec, the request a front
// end makes, reaches no protocol package (issue 59): what it needs to say
// of a protocol's lock comes through the root API and lock.Status.
func TestLockspecImportsNoProtocol(t *testing.T) {
	for _, goos := range systems {
		pkgs := list(t, goos)
		p := pkgs["internal/lockspec"]
		if p == nil {
			t.Fatalf("GOOS=%s: go list did not list internal/lockspec", goos)
		}
		for _, i := range moduleImports(p) {
			if slices.Contains(protocols, i) {
				t.Errorf("GOOS=%s: internal/lockspec imports %s, a protocol: have the protocol say it through lock.Status or a capability in lock", goos, i)
			}
		}
	}
}

// TestRootOnly checks that the packages of rootOnly are imported by the
// root package alone (their own tests aside), and not the root by them
// (TestImportsRunOneWay).
func TestRootOnly(t *testing.T) {
	for _, goos := range systems {
		pkgs := list(t, goos)
		for _, r := range rootOnly {
			if pkgs[r] == nil {
				t.Fatalf("GOOS=%s: go list did not list %s", goos, r)
			}
		}
		for _, r := range sortedKeys(pkgs) {
			if r == "" {
				continue
			}
			for _, i := range moduleImports(pkgs[r]) {
				if slices.Contains(rootOnly, i) {
					t.Errorf("GOOS=%s: %s imports %s, which only the root package calls: go through the root API", goos, name(r), i)
				}
			}
		}
	}
}

// TestRootLinks checks what a program that imports only hold links: not
// the doctor's probes, no network client. And that cmd/hold links no
// network client (the companions do; cmd/hold's own test says why).
func TestRootLinks(t *testing.T) {
	forbidden := map[string][]string{
		"":         {module + "/doctor", module + "/internal/doctor", module + "/etcd", module + "/postgres", "go.etcd.io/", "google.golang.org/grpc", "github.com/jackc/pgx"},
		"cmd/hold": {module + "/etcd", module + "/postgres", "go.etcd.io/", "google.golang.org/grpc", "google.golang.org/protobuf", "github.com/jackc/pgx"},
	}
	for _, goos := range systems {
		pkgs := list(t, goos)
		for _, r := range sortedKeys(forbidden) {
			p := pkgs[r]
			if p == nil {
				t.Fatalf("GOOS=%s: go list did not list %s", goos, name(r))
			}
			for _, d := range p.Deps {
				for _, f := range forbidden[r] {
					if d == strings.TrimSuffix(f, "/") || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
						t.Errorf("GOOS=%s: %s links %s", goos, name(r), d)
					}
				}
			}
		}
	}
}

func names(rs []string) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = name(r)
	}
	return strings.Join(out, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
