package testenv

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Nobody is the user (and group) id that permission tests run a worker
// as when the tests run as root, as CI does: root ignores permission
// bits, so only another user shows what they refuse.
const Nobody = 65534

// NeedRoot skips t unless it runs as root, saying why it needs root.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why + " (CI runs the tests as root)")
	}
}

// ExecutableCopy copies this test binary into dir, which should be a
// PublicDir, and returns the copy's path: the binary itself lies in the
// go command's build directory, which only the user who built it may
// enter, so a worker run as another user must start from a copy.
func ExecutableCopy(t testing.TB, dir string) string {
	t.Helper()
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	to := filepath.Join(dir, filepath.Base(os.Args[0]))
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return to
}
