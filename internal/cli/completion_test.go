//go:build unix

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/testenv"
)

// completeWords runs `hold __complete ARGS...` and returns the directive
// and the candidate words.
func completeWords(t *testing.T, dir string, env []string, args ...string) (string, []string) {
	t.Helper()
	r := runHoldEnv(t, dir, env, append([]string{completeCommand}, args...)...)
	if r.code != 0 {
		t.Fatalf("hold __complete %q: exit %d: %s", args, r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	var words []string
	for _, l := range lines[1:] {
		w, _, _ := strings.Cut(l, "\t")
		words = append(words, w)
	}
	return lines[0], words
}

func TestCompleteAnswers(t *testing.T) {
	t.Parallel()
	dir, runtimeDir := t.TempDir(), t.TempDir()
	env := []string{"HOLD_TEST_NAMED_DIR=" + filepath.Join(runtimeDir, "hold")}
	if r := runHoldEnv(t, dir, env, "run", "--name", "deploy", "--", "true"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	for _, c := range []struct {
		args      []string
		directive string
		want      []string // all of them, in order; nil: none
	}{
		{[]string{"st"}, completeNoFiles, []string{"status"}},
		{[]string{"help", "do"}, completeNoFiles, []string{"doctor"}},
		{[]string{"run", "--protocol", ""}, completeNoFiles, lockspec.ProtocolNames()},
		{[]string{"run", "--protocol=f"}, completeNoFiles, []string{"--protocol=flock"}},
		{[]string{"run", "--protocol", "=", "d"}, completeNoFiles, []string{"dir"}},
		{[]string{"run", "--name", "d"}, completeNoFiles, []string{"deploy"}},
		{[]string{"run", "--nonb"}, completeNoFiles, []string{"--nonblock"}},
		{[]string{"run", "-n", ""}, completeFiles, nil},
		{[]string{"run", "-w", "3", "T", "-"}, completeFiles, nil}, // the command's own flags
		{[]string{"run", "--lock-file", ""}, completeFiles, nil},
		{[]string{"status", "T", "--js"}, completeNoFiles, []string{"--json"}},
		{[]string{"completion", ""}, completeNoFiles, []string{"bash", "fish", "zsh"}},
		{[]string{"ls", "--rec"}, completeNoFiles, []string{"--recursive"}},
		{[]string{"ls", "--fa"}, completeNoFiles, nil}, // hidden there
	} {
		directive, words := completeWords(t, dir, env, c.args...)
		if directive != c.directive || !slices.Equal(words, c.want) {
			t.Errorf("complete %q: %s %q, want %s %q", c.args, directive, words, c.directive, c.want)
		}
	}
	// Every visible command is offered for an empty word, and no hidden one.
	if _, words := completeWords(t, dir, env, ""); !slices.Equal(words, visibleCommands()) {
		t.Errorf("complete \"\": %q, want %q", words, visibleCommands())
	}
}

// shellEnv is the environment for a shell that finds the hold binary
// under test on PATH.
func shellEnv() []string {
	return append(os.Environ(), "PATH="+filepath.Dir(holdBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// runShell runs a shell script in dir and returns its output.
func runShell(t *testing.T, dir, shell string, args ...string) string {
	t.Helper()
	path := testenv.LookPath(t, shell, "not installed (.ci/run installs it)")
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = shellEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", shell, args, err, out)
	}
	return string(out)
}

func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "file.txt"), nil, 0o644)
	t.Run("bash", func(t *testing.T) {
		out := runShell(t, dir, "bash", "-c", `source <(hold completion bash) || exit 1
complete -p hold || exit 1
COMP_WORDS=(hold st); COMP_CWORD=1; _hold; echo "1:${COMPREPLY[*]}"
COMP_WORDS=(hold run --protocol f); COMP_CWORD=3; _hold; echo "2:${COMPREPLY[*]}"
COMP_WORDS=(hold run fi); COMP_CWORD=2; _hold; echo "3:${COMPREPLY[*]}"`)
		for _, want := range []string{"1:status\n", "2:flock\n", "3:file.txt\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("bash completion: no %q in\n%s", want, out)
			}
		}
	})
	t.Run("zsh", func(t *testing.T) {
		// The script registers itself with compinit; its function is run
		// with the completion system's helpers replaced by printers.
		out := runShell(t, dir, "zsh", "-f", "-c", `autoload -U compinit && compinit -u -D || exit 1
source <(hold completion zsh) || exit 1
print "0:${_comps[hold]}"
_describe() { print -l -- "1:${(@P)4}" }
_files() { print 3:files }
words=(hold st); CURRENT=2; _hold
words=(hold run fi); CURRENT=3; _hold`)
		for _, want := range []string{"0:_hold\n", "1:status:show whether", "3:files\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("zsh completion: no %q in\n%s", want, out)
			}
		}
	})
	t.Run("fish", func(t *testing.T) {
		out := runShell(t, dir, "fish", "--no-config", "-c", `hold completion fish | source; or exit 1
complete -C "hold st"; complete -C "hold run --protocol f"; complete -C "hold run fi"`)
		for _, want := range []string{"status\tshow whether", "flock\tkernel lock", "file.txt\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("fish completion: no %q in\n%s", want, out)
			}
		}
	})
}
