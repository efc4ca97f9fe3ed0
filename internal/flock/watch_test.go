package flock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// watchBound only catches a watch that never closes Lost: it is a hang
// bound, many times lossPoll, not a timing claim.
const watchBound = 30 * time.Second

// TestLostClosesWhenLockFileGoes: a holder watching Lost, and doing
// nothing else (no Check), is told of the loss by the library itself once
// its lock file is removed or replaced, while another process holds the
// new lock at the path.
func TestLostClosesWhenLockFileGoes(t *testing.T) {
	testenv.SkipUnderWine(t, "a removed file that is still open keeps its name until its last handle closes, and no file can be renamed over it, as before Windows 10")
	for _, damage := range []string{"removed", "replaced"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "t.lock")
			a := startWorker(t, "watcher", path)
			a.expect(t, "held")
			switch damage {
			case "removed":
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			case "replaced":
				tmp := filepath.Join(dir, "new")
				if err := os.WriteFile(tmp, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, path); err != nil {
					t.Fatal(err)
				}
			}
			// B locks the file the path names now: the two holds
			// overlap, which is what the loss means.
			b := startWorker(t, "holder", path)
			b.expect(t, "held")
			line := a.expect(t, "lost")
			if !strings.Contains(line, lostWhy) {
				t.Errorf("the watcher's loss %q does not say why (%q)", line, lostWhy)
			}
			a.wait(t)
			b.stdin.Close()
			b.wait(t)
		})
	}
}

// TestUnwatchedHoldIsNotWatched: a hold whose Lost nobody asked for never
// joins the watch, and a watched one leaves it on Release.
func TestUnwatchedHoldIsNotWatched(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if watching(h) {
		t.Error("a hold nobody asked Lost of is watched")
	}
	h.Lost()
	if !watching(h) {
		t.Error("a hold whose Lost was asked for is not watched")
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if watching(h) {
		t.Error("a released hold is still watched")
	}
	h.Lost()
	if watching(h) {
		t.Error("Lost after Release watches the released hold")
	}
}

func watching(h lock.Handle) bool {
	watch.mu.Lock()
	defer watch.mu.Unlock()
	_, ok := watch.m[h.(*handle)]
	return ok
}

// watcherRole takes the lock at path, says "held", and waits for Lost,
// without ever calling Check; then it says "lost" and the error Check
// gives. Exit status 1 if Lost stays open for watchBound.
func watcherRole(path string) int {
	var p Protocol
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	lost := h.Lost()
	fmt.Println("held")
	select {
	case <-lost:
	case <-time.After(watchBound):
		fmt.Println("not lost")
		return 1
	}
	err = h.Check()
	fmt.Println("lost", err)
	if !errors.Is(err, lock.ErrLost) {
		return 1
	}
	if err := h.Release(); !errors.Is(err, lock.ErrLost) {
		fmt.Println("release", err)
		return 1
	}
	return 0
}

// holderRole takes the lock at path, says "held", and holds it until its
// standard input ends.
func holderRole(path string) int {
	var p Protocol
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	if err := h.Release(); err != nil {
		fmt.Println("release", err)
		return 1
	}
	return 0
}

type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startWorker(t *testing.T, role, path string) *worker {
	t.Helper()
	return startWorkerEnv(t, roleEnv+"="+role, pathEnv+"="+path)
}

// startWorkerEnv starts a worker with env (its role and path among it).
func startWorkerEnv(t *testing.T, env ...string) *worker {
	t.Helper()
	cmd := testenv.Command(env...)
	cmd.Stderr = os.Stderr
	stdin, out := testenv.StartPiped(t, cmd)
	w := &worker{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			w.lines <- s.Text()
		}
		close(w.lines)
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return w
}

// expect returns the worker's next line, which must start with word.
func (w *worker) expect(t *testing.T, word string) string {
	t.Helper()
	select {
	case line, ok := <-w.lines:
		if !ok || !strings.HasPrefix(line, word) {
			t.Fatalf("%s: got %q (open %v), want %q", w.cmd.Env[len(w.cmd.Env)-2], line, ok, word)
		}
		return line
	case <-time.After(2 * watchBound):
		t.Fatalf("%s: no %q", w.cmd.Env[len(w.cmd.Env)-2], word)
	}
	return ""
}

func (w *worker) wait(t *testing.T) {
	t.Helper()
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("%s: %v", w.cmd.Env[len(w.cmd.Env)-2], err)
	}
}
