//go:build unix

package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/nameddir"
	"github.com/hold-dev/hold/internal/testenv"
)

// namedEnvironments are the environments a user's jobs run in, as far as
// where named locks live could depend on them: a login shell
// (XDG_RUNTIME_DIR set), cron (unset), another TMPDIR, and `env -i`. The
// tests' own override of the named-lock directory is left out of all of
// them, so that hold uses the real one.
func namedEnvironments(t *testing.T) map[string][]string {
	var base []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != nameddir.TestEnv && k != "XDG_RUNTIME_DIR" && k != "TMPDIR" {
			base = append(base, kv)
		}
	}
	with := func(extra ...string) []string { return append(append([]string(nil), base...), extra...) }
	return map[string][]string{
		"login shell":  with("XDG_RUNTIME_DIR="+t.TempDir(), "TMPDIR="+t.TempDir()),
		"cron":         with(),
		"other TMPDIR": with("TMPDIR=" + t.TempDir()),
		"env -i":       {"PATH=/usr/bin:/bin"},
	}
}

// holdWithEnv is the hold binary run in dir with exactly env.
func holdWithEnv(ctx context.Context, dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, holdBin, args...)
	cmd.Dir = dir
	cmd.Env = env
	return cmd
}

// TestNamedLockSameInEveryEnvironment: --name NAME held from one
// environment is busy from every other, and its lock file is in the one
// named-lock directory, whatever XDG_RUNTIME_DIR and TMPDIR say.
func TestNamedLockSameInEveryEnvironment(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("hold-test-env-%d", os.Getpid())
	real, err := nameddir.System()
	if err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(real, name+".lock")
	t.Cleanup(func() { os.Remove(lockPath) })
	envs := namedEnvironments(t)
	for holderEnv, henv := range envs {
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
		holder := holdWithEnv(ctx, dir, henv, "run", "--name", name, "-c", gatedCommand)
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, filepath.Join(dir, "ready"))
		if _, err := os.Stat(lockPath); err != nil {
			t.Errorf("held from %s: the lock file is not %s: %v", holderEnv, lockPath, err)
		}
		for otherEnv, oenv := range envs {
			var errb bytes.Buffer
			try := holdWithEnv(ctx, dir, oenv, "run", "-n", "--name", name, "--", "true")
			try.Stderr = &errb
			try.Run()
			if code := try.ProcessState.ExitCode(); code != 1 {
				t.Errorf("--name %s held from %s, tried from %s: exit %d, want 1 (busy): %s", name, holderEnv, otherEnv, code, errb.String())
			}
		}
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		if err := holder.Wait(); err != nil {
			t.Errorf("holder from %s: %v", holderEnv, err)
		}
		cancel()
	}
}

// TestNamedLockHeldAtEarlierPlace: a holder of the name where earlier
// versions kept named locks ($XDG_RUNTIME_DIR/hold, hold-UID in $TMPDIR),
// here flock(1) on that file as an older hold held it, is not joined:
// hold run -n reports it busy (with --verbose, since stderr is no
// terminal here), naming the place, hold run -w waits for it,
// hold status reports it, and hold ls lists it while held.
func TestNamedLockHeldAtEarlierPlace(t *testing.T) {
	t.Parallel()
	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	xdg, tmp := t.TempDir(), t.TempDir()
	for _, old := range []string{filepath.Join(xdg, "hold"), filepath.Join(tmp, fmt.Sprintf("hold-%d", os.Getuid()))} {
		dir := t.TempDir()
		env := []string{"XDG_RUNTIME_DIR=" + xdg, "TMPDIR=" + tmp, nameddir.TestEnv + "=" + filepath.Join(dir, "named")}
		if err := os.Mkdir(old, 0o700); err != nil {
			t.Fatal(err)
		}
		oldLock := filepath.Join(old, "nightly-db.lock")
		fl := exec.Command(flock, oldLock, "sh", "-c", gatedCommand)
		fl.Dir = dir
		if err := fl.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, filepath.Join(dir, "ready"))

		r := runHoldEnv(t, dir, env, "run", "-n", "--verbose", "--name", "nightly-db", "--", "true")
		if r.code != 1 || !strings.Contains(r.stderr, old) {
			t.Errorf("held at %s: hold run -n --name: exit %d, want 1 and a message naming %s: %s", old, r.code, old, r.stderr)
		}
		r = runHoldEnv(t, dir, env, "status", "--json", "--name", "nightly-db")
		if !strings.Contains(r.stdout, `"held":true`) || !strings.Contains(r.stdout, old) {
			t.Errorf("held at %s: hold status: %s %s", old, r.stdout, r.stderr)
		}
		r = runHoldEnv(t, dir, env, "ls")
		if !strings.Contains(r.stdout, oldLock) {
			t.Errorf("held at %s: hold ls does not list it:\n%s%s", old, r.stdout, r.stderr)
		}
		// A waiter gets the name once the old holder is done, not before.
		waiter := holdWithEnv(context.Background(), dir, append(os.Environ(), env...), "run", "-w", "60", "--name", "nightly-db", "--", "sh", "-c", "cat out > seen")
		if err := waiter.Start(); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		fl.Wait()
		if code := waitExit(t, waiter); code != 0 {
			t.Errorf("held at %s: the waiter: exit %d", old, code)
		}
		if seen, _ := os.ReadFile(filepath.Join(dir, "seen")); string(seen) != "done\n" {
			t.Errorf("held at %s: the waiter ran while the old holder held the name (it saw %q)", old, seen)
		}
		// Released, the old place's leftover is not listed.
		if r = runHoldEnv(t, dir, env, "ls"); strings.Contains(r.stdout, oldLock) {
			t.Errorf("a free lock at %s is listed:\n%s", old, r.stdout)
		}
	}
}

// TestNamedLockEarlierPlaceNotYours: an earlier place of named locks that
// hold run skips, because another user made it or anyone may write it,
// is skipped by hold status --name and hold ls too: a lock held there
// with a record of its maker's choosing is not shown as the user's lock.
// (Root makes the other user's directory here: the tests run as root.)
func TestNamedLockEarlierPlaceNotYours(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("making a directory of another user's needs root (CI runs as root)")
	}
	for _, how := range []string{"another user's", "writable by others"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			dir, tmp := t.TempDir(), t.TempDir()
			env := []string{"XDG_RUNTIME_DIR=", "TMPDIR=" + tmp, nameddir.TestEnv + "=" + filepath.Join(dir, "named")}
			old := filepath.Join(tmp, fmt.Sprintf("hold-%d", os.Getuid()))
			if err := os.Mkdir(old, 0o700); err != nil {
				t.Fatal(err)
			}
			if how == "another user's" {
				testenv.Lchown(t, old, testenv.Someone, testenv.SomeGroup)
			} else if err := os.Chmod(old, 0o777); err != nil {
				t.Fatal(err)
			}
			// The planted holder: a lock with a record that names a
			// command of its maker's choosing.
			oldLock := filepath.Join(old, "nightly.lock")
			holder := holdWithEnv(context.Background(), dir, append(os.Environ(), env...),
				"run", "--lock-file", oldLock, "--field", "forged=yes", "-c", gatedCommand)
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
			waitFor(t, filepath.Join(dir, "ready"))

			r := runHoldEnv(t, dir, env, "status", "--json", "--name", "nightly")
			if r.code != exitStatusFree || !strings.Contains(r.stdout, `"held":false`) || strings.Contains(r.stdout, "forged") {
				t.Errorf("hold status --name nightly reports the lock at %s (%s) as the user's: exit %d: %s%s", old, how, r.code, r.stdout, r.stderr)
			}
			r = runHoldEnv(t, dir, env, "ls")
			if strings.Contains(r.stdout, oldLock) {
				t.Errorf("hold ls lists the lock at %s (%s):\n%s%s", old, how, r.stdout, r.stderr)
			}
			r = runHoldEnv(t, dir, env, "run", "-n", "--name", "nightly", "--", "true")
			if r.code != 0 {
				t.Errorf("hold run -n --name nightly: exit %d, want 0 (the place is skipped): %s", r.code, r.stderr)
			}
			os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
			if code := waitExit(t, holder); code != 0 {
				t.Errorf("the planted holder: exit %d", code)
			}
		})
	}
}
