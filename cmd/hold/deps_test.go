package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// hold must start as fast as flock(1), so it links no network backend: their
// clients' package initialisation (gRPC, protobuf, the etcd and PostgreSQL
// drivers) would run on every local lock. Those live in the companions
// hold-remote and hold-postgres.
func TestLinksNoNetworkBackend(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"github.com/hold-dev/hold/etcd",
		"github.com/hold-dev/hold/postgres",
		"go.etcd.io/",
		"google.golang.org/grpc",
		"google.golang.org/protobuf",
		"github.com/jackc/pgx",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge: %q", out)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f) {
				t.Errorf("cmd/hold links %s; network backends belong in cmd/hold-remote", d)
			}
		}
	}
}

// hold must be a static executable however it is built (go build, go
// install, the release build): dynamic linking costs every call the
// dynamic loader's start-up, and a static file is what a release ships.
// The net package is what turns cgo on (its resolver uses libc's where cgo is
// available), so hold imports neither net nor runtime/cgo, whatever the
// environment's CGO_ENABLED says.
func TestLinksNoCgo(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		switch {
		case d == "net" || d == "runtime/cgo" || d == "os/user" || d == "plugin":
			t.Errorf("cmd/hold imports %s%s, which links libc through cgo; keep it out", d, importers(t, d))
		case d == "crypto" || strings.HasPrefix(d, "crypto/"):
			// Any crypto package brings Go's FIPS module, whose package
			// initialisation every hold process would run. hold's random
			// ids come from the runtime's generator (randname.Hex).
			if d == "crypto" || !strings.HasPrefix(d, "crypto/internal/") {
				t.Errorf("cmd/hold imports %s%s: its initialisation would run at every start; keep crypto out", d, importers(t, d))
			}
		}
	}
}

// importers says which packages of hold's build import pkg, as
// " (through A, B)", or "" if none does explicitly (runtime/cgo comes in
// with any package that uses cgo).
func importers(t *testing.T, pkg string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		return ""
	}
	var by []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 1 && slices.Contains(fields[1:], pkg) {
			by = append(by, fields[0])
		}
	}
	if len(by) == 0 {
		return ""
	}
	return " (through " + strings.Join(by, ", ") + ")"
}

// The binaries themselves: hold built the way `go install` builds it, and
// the companions built the way the release builds them (CGO_ENABLED=0;
// they need package net for their network clients, which a plain build
// with a C compiler present links through cgo) have no dynamic loader.
func TestStaticExecutables(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads ELF program headers: Linux only")
	}
	if testing.Short() {
		t.Skip("builds three commands; -short skips it")
	}
	dir := t.TempDir()
	for _, c := range []struct{ pkg, cgo string }{
		{"github.com/hold-dev/hold/cmd/hold", "1"},
		{"github.com/hold-dev/hold/cmd/hold-remote", "0"},
		{"github.com/hold-dev/hold/cmd/hold-postgres", "0"},
	} {
		exe := filepath.Join(dir, filepath.Base(c.pkg))
		build := exec.Command("go", "build", "-o", exe, c.pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED="+c.cgo)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s with CGO_ENABLED=%s: %v\n%s", c.pkg, c.cgo, err, out)
		}
		f, err := elf.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s (CGO_ENABLED=%s) has a dynamic loader (PT_INTERP): it is not static", c.pkg, c.cgo)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s (CGO_ENABLED=%s) needs shared libraries %v", c.pkg, c.cgo, libs)
		}
		f.Close()
	}
}
