package robust

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot finds hold's own module (the directory whose go.mod declares
// github.com/hold-dev/hold) from dir upwards: the suite lives in a module of
// its own inside it.
func RepoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "module github.com/hold-dev/hold\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no hold module above %s", dir)
		}
	}
}

// BuildHold builds the hold command of the tree at root into out.
func BuildHold(root, out string) error {
	cmd := exec.Command("go", "build", "-o", out, "./cmd/hold")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/hold in %s: %v\n%s", root, err, b)
	}
	return nil
}
