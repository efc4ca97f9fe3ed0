package flock

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/testenv"
)

// envDiscardStop makes the discarder role stop once it has moved its lock
// file aside, until a line arrives on its standard input.
const envDiscardStop = "FLOCK_TEST_DISCARD_STOP"

func init() { roles["discarder"] = discarderRole }

// discarderRole takes the lock at path, which it creates, says "held",
// and on a line from its standard input releases it with Discard's
// removal (removeIfAlone). Once it holds the lease it says "leased" and
// waits for another process's open to break it; with envDiscardStop it
// says "moved" once the file is aside and waits for a line.
func discarderRole(path string) int {
	in := bufio.NewReader(os.Stdin)
	var p Protocol
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	hd := h.(*handle)
	if !hd.f.created {
		fmt.Println("error: the lock file existed")
		return 1
	}
	hd.DiscardOnRelease()
	discardHook = func(step string, fd int) {
		switch step {
		case "leased":
			fmt.Println("leased")
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				if t, err := unix.FcntlInt(uintptr(fd), unix.F_GETLEASE, 0); err != nil || t != unix.F_WRLCK {
					return
				}
			}
			fmt.Println("error: nobody broke the lease")
		case "moved":
			if os.Getenv(envDiscardStop) != "" {
				fmt.Println("moved")
				in.ReadString('\n')
			}
		}
	}
	fmt.Println("held")
	in.ReadString('\n')
	if err := h.Release(); err != nil {
		fmt.Println("release", err)
		return 1
	}
	fmt.Println("released")
	return 0
}

// A waiter that opens the lock file while Discard's lease is held waits
// for it and then gets the lock (the open is non-blocking, and the lease
// break made it fail with EAGAIN); and when the path was taken while the
// file was aside, the side file goes.
func TestDiscardLeaseWindow(t *testing.T) {
	for _, newcomer := range []bool{false, true} {
		name := "renamed back"
		if newcomer {
			name = "path taken meanwhile"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "job.lock")
			env := []string{roleEnv + "=discarder", pathEnv + "=" + path}
			if newcomer {
				env = append(env, envDiscardStop+"=1")
			}
			w := startWorkerEnv(t, env...)
			w.expect(t, "held")
			fmt.Fprintln(w.stdin)
			if line := w.expect(t, ""); line == "released" {
				testenv.MissingTool(t, "file leases", "the kernel refused F_SETLEASE (/proc/sys/fs/leases-enable)")
				return
			} else if line != "leased" {
				t.Fatalf("discarder: %q", line)
			}
			got := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				h, err := Protocol{}.Acquire(ctx, request(path, false))
				if err == nil {
					err = h.Release()
				}
				got <- err
			}()
			if newcomer {
				w.expect(t, "moved")
				// A newcomer makes a lock file at the free path (or the
				// waiter above did, on one of its retries).
				if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666); err == nil {
					f.Close()
				}
				fmt.Fprintln(w.stdin)
			}
			w.expect(t, "released")
			w.wait(t)
			if err := <-got; err != nil {
				t.Fatalf("the waiter during Discard's lease: %v", err)
			}
			side, _ := filepath.Glob(filepath.Join(dir, ".*hold-discard*"))
			if len(side) > 0 {
				t.Fatalf("side files left: %v", side)
			}
			if _, err := os.Lstat(path); err != nil {
				t.Fatalf("the lock file the waiter locked: %v", err)
			}
		})
	}
}
