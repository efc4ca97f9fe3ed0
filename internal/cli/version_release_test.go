//go:build unix

package cli

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersionFromLinkerFlags builds hold the way the release build does,
// setting the release variables with -ldflags -X (their names must match
// .goreleaser.yaml's), and checks that hold version and hold --version
// print them.
func TestVersionFromLinkerFlags(t *testing.T) {
	const pkg = "github.com/hold-dev/hold/internal/cli"
	bin := filepath.Join(t.TempDir(), "hold")
	ldflags := "-X " + pkg + ".releaseVersion=1.2.3 -X " + pkg + ".releaseCommit=abcdef0123 -X " + pkg + ".releaseDate=2026-11-30T12:00:00Z"
	build := exec.Command("go", "build", "-ldflags="+ldflags, "-o", bin, "../../cmd/hold")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := "hold 1.2.3 (commit abcdef0123, built 2026-11-30T12:00:00Z), " + runtime.Version() + "\n"
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("hold %s: %v", arg, err)
		}
		if string(out) != want {
			t.Errorf("hold %s printed %q, want %q", arg, out, want)
		}
	}
	// Without the flags, the build information describes the build.
	out, err := exec.Command(holdBin, "version").Output()
	if err != nil {
		t.Fatalf("hold version: %v", err)
	}
	if strings.Contains(string(out), "1.2.3") || !strings.HasSuffix(strings.TrimSpace(string(out)), runtime.Version()) {
		t.Errorf("hold version without release flags printed %q", out)
	}
}
