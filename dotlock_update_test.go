package hold_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

func init() {
	hold.RegisterWorker("dotlock-mix", dotlockMixWorker)
}

// dotlockMixWorker increments the counter in DOTLOCK_FILE, a file whose
// name ends in ".lock", DOTLOCK_ROUNDS times: by hold.Update (rename) when
// DOTLOCK_ROLE is "update", or in place under hold.Do on the file itself
// (its own lock) when it is "run". A run holder checks that the file is
// neither replaced nor changed while it holds it, and exits 3 if it is.
func dotlockMixWorker() int {
	path := os.Getenv("DOTLOCK_FILE")
	rounds, _ := strconv.Atoi(os.Getenv("DOTLOCK_ROUNDS"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range rounds {
		var err error
		switch os.Getenv("DOTLOCK_ROLE") {
		case "update":
			err = hold.Update(ctx, path, func(old []byte) ([]byte, error) {
				n, err := strconv.Atoi(strings.TrimSpace(string(old)))
				if err != nil {
					return nil, fmt.Errorf("counter holds %q", old)
				}
				time.Sleep(time.Millisecond)
				return []byte(strconv.Itoa(n+1) + "\n"), nil
			})
		case "run":
			err = hold.Do(ctx, path, func(context.Context) error {
				before, err := os.Stat(path)
				if err != nil {
					return err
				}
				old, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				time.Sleep(time.Millisecond)
				after, err := os.Stat(path)
				if err != nil {
					return err
				}
				now, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if !os.SameFile(before, after) || !bytes.Equal(old, now) {
					fmt.Printf("replaced or changed during the hold: %q then %q\n", old, now)
					os.Exit(3)
				}
				n, err := strconv.Atoi(strings.TrimSpace(string(old)))
				if err != nil {
					return fmt.Errorf("counter holds %q", old)
				}
				return os.WriteFile(path, []byte(strconv.Itoa(n+1)+"\n"), 0o644)
			})
		}
		if err != nil {
			fmt.Println(err)
			return 2
		}
	}
	return 0
}

// TestDotLockDoAndUpdateExclude: in the Go API as on the command line, a
// holder of "c.lock" (its own lock file) and Update of "c.lock" (which
// replaces it, keeping its lock apart in c.lock.lock) exclude each other:
// worker processes of both kinds lose no increment, and no holder sees the
// file change under it.
func TestDotLockDoAndUpdateExclude(t *testing.T) {
	skipReplacingOwnLockOnWindows(t)
	path := filepath.Join(t.TempDir(), "c.lock")
	if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 3, 15
	var ws []*coreWorker
	for range workers {
		for _, role := range []string{"run", "update"} {
			ws = append(ws, startCoreWorker(t, "dotlock-mix", "DOTLOCK_FILE="+path, "DOTLOCK_ROLE="+role, "DOTLOCK_ROUNDS="+strconv.Itoa(rounds)))
		}
	}
	for _, w := range ws {
		if err := w.wait(t, 3*time.Minute); err != nil {
			t.Errorf("worker %d: %v: %s", w.cmd.Process.Pid, err, w.out.String())
		}
	}
	b, _ := os.ReadFile(path)
	if got, want := strings.TrimSpace(string(b)), strconv.Itoa(2*workers*rounds); got != want {
		t.Errorf("counter = %s, want %s: increments were lost", got, want)
	}
}

// TestDotLockUpdateLeavesNoFile: an update of a missing "new.lock" creates
// it only to lock it; when nothing is published, it is gone again.
func TestDotLockUpdateLeavesNoFile(t *testing.T) {
	skipReplacingOwnLockOnWindows(t)
	path := filepath.Join(t.TempDir(), "new.lock")
	boom := errors.New("no")
	if err := hold.Update(context.Background(), path, func([]byte) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("Update: %v, want the function's error", err)
	}
	if fileExists(path) {
		t.Errorf("%s was left behind by an update that published nothing", path)
	}
	if err := hold.Update(context.Background(), path, func([]byte) ([]byte, error) { return []byte("1\n"), nil }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "1\n" {
		t.Errorf("%s holds %q, want the update's", path, b)
	}
}

// skipReplacingOwnLockOnWindows skips a test of Update on a file that is
// its own lock file where Update refuses it (see refuseReplacingOwnLock),
// after checking that it does refuse, leaving the file as it was.
func skipReplacingOwnLockOnWindows(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "windows" {
		return
	}
	path := filepath.Join(t.TempDir(), "own.lock")
	if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := hold.Update(context.Background(), path, func([]byte) ([]byte, error) { return []byte("1\n"), nil })
	if !errors.Is(err, hold.ErrUnsupported) {
		t.Fatalf("Update of %s on Windows: %v, want ErrUnsupported", path, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "0\n" {
		t.Fatalf("a refused update changed %s: %q", path, b)
	}
	t.Skip("Windows refuses Update of a file that is its own lock file (it cannot be renamed over while locked)")
}
