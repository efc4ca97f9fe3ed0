package lockpath

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hold-dev/hold/lock"
)

func TestFromTarget(t *testing.T) {
	sep := string(filepath.Separator)
	// own: the file a target that is a lock file by name is locked as
	// too ("" for none).
	for _, c := range []struct{ target, lock, own string }{
		{"data.json", "data.json.lock", ""},
		{"x.lock", "x.lock.lock", "x.lock"},
		{"/var/lock/x.lock", "/var/lock/x.lock.lock", "/var/lock/x.lock"},
		{"dir" + sep + "app.lock" + sep, "dir" + sep + "app.lock.lock", "dir" + sep + "app.lock"},
		{"data" + sep, "data.lock", ""},
		{".lock", ".lock.lock", ".lock"},
		{"x.lock.d", "x.lock.d.lock", ""},
		{"x.LOCK", "x.LOCK.lock", ""},
	} {
		got, err := FromTarget(c.target)
		if err != nil || got != c.lock {
			t.Errorf("FromTarget(%q) = %q, %v; want %q", c.target, got, err, c.lock)
		}
		own, ok := Own(c.target)
		if own != c.own || ok != (c.own != "") || IsOwn(c.target) != ok {
			t.Errorf("Own(%q) = %q, %v (IsOwn %v); want %q", c.target, own, ok, IsOwn(c.target), c.own)
		}
		if !Serves(c.target, c.lock) || (c.own != "" && !Serves(c.target, c.own)) {
			t.Errorf("Serves(%q, %q or %q) = false", c.target, c.lock, c.own)
		}
		if Serves(c.target, c.lock+Suffix) {
			t.Errorf("Serves(%q, %q) = true", c.target, c.lock+Suffix)
		}
	}
	if _, err := FromTarget(sep); !errors.Is(err, lock.ErrInvalidName) {
		t.Errorf("FromTarget(root) = %v, want ErrInvalidName", err)
	}
	for s, want := range map[string]string{"deploy": "deploy.lock", "deploy.lock": "deploy.lock", "a/b.lock": "a/b.lock"} {
		if got := Append(s); got != want {
			t.Errorf("Append(%q) = %q, want %q", s, got, want)
		}
	}
	valid := func(n string) bool { return n != "" }
	for file, want := range map[string]string{"deploy.lock": "deploy", "x.lock.lock": "x.lock", "notes.txt": "", ".lock": ""} {
		got, ok := NameOf(file, valid)
		if (want != "") != ok || (ok && got != want) {
			t.Errorf("NameOf(%q) = %q, %v; want %q", file, got, ok, want)
		}
	}
}

// TestRootsRefused: every spelling of a root directory is refused, on the
// system's own separators ("C:/" on Windows, whose Dir is `C:\`, too).
func TestRootsRefused(t *testing.T) {
	roots := []string{"/", "//"}
	if filepath.Separator == '\\' {
		roots = []string{`\`, "/", `C:\`, "C:/", `C:\\`, `\\host\share\`}
	}
	for _, r := range roots {
		if _, err := FromTarget(r); !errors.Is(err, lock.ErrInvalidName) {
			t.Errorf("FromTarget(%q) = %v, want ErrInvalidName", r, err)
		}
	}
	for _, ok := range []string{"a", "/a", "a/"} {
		if _, err := FromTarget(ok); err != nil {
			t.Errorf("FromTarget(%q): %v", ok, err)
		}
	}
}
