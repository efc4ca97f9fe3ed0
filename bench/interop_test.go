//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gofrs "github.com/gofrs/flock"

	"github.com/hold-dev/hold"
)

// interopWorker names the library an interop worker locks with.
const interopWorker = "HOLD_BENCH_INTEROP_WORKER"

// A worker process of TestGofrsAndHoldExclude: it locks the path in
// HOLD_BENCH_INTEROP_PATH with gofrs/flock or hold.Acquire, says "held",
// and keeps the lock until its stdin closes.
func init() {
	which := os.Getenv(interopWorker)
	if which == "" {
		return
	}
	path := os.Getenv("HOLD_BENCH_INTEROP_PATH")
	var release func() error
	switch which {
	case "gofrs":
		f := gofrs.New(path)
		if err := f.Lock(); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		release = f.Unlock
	case "hold":
		l, err := hold.Acquire(context.Background(), path)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		release = l.Release
	}
	fmt.Println("held")
	bufio.NewReader(os.Stdin).ReadString('\n')
	if err := release(); err != nil {
		os.Exit(3)
	}
	os.Exit(0)
}

// startInterop starts a worker holding path with which; closing the
// returned stdin lets it release and exit.
func startInterop(t *testing.T, which, path string) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), interopWorker+"="+which, "HOLD_BENCH_INTEROP_PATH="+path)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { line, _ := bufio.NewReader(out).ReadString('\n'); got <- line }()
	select {
	case line := <-got:
		if strings.TrimSpace(line) != "held" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s worker: %q", which, line)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%s worker did not take the lock within a minute", which)
	}
	done := false
	stop := func() {
		if !done {
			done = true
			in.Close()
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return cmd, stop
}

// TestGofrsAndHoldExclude: hold.Acquire("app.lock") and gofrs/flock's
// flock.New("app.lock") lock one file and exclude each other across
// processes, both ways; hold keeps its record in the companion
// app.lock.lock and writes nothing into app.lock.
func TestGofrsAndHoldExclude(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.lock")

	_, stop := startInterop(t, "gofrs", path)
	if l, err := hold.TryAcquire(path); !errors.Is(err, hold.ErrBusy) {
		if l != nil {
			l.Release()
		}
		t.Errorf("hold.TryAcquire(%q) while gofrs/flock holds it in another process: %v, want ErrBusy", path, err)
	}
	stop()
	l, err := hold.TryAcquire(path)
	if err != nil {
		t.Fatalf("hold.TryAcquire(%q) once gofrs/flock let go: %v", path, err)
	}
	l.Release()

	_, stop = startInterop(t, "hold", path)
	f := gofrs.New(path)
	if ok, err := f.TryLock(); ok || err != nil {
		f.Unlock()
		t.Errorf("gofrs TryLock(%q) while hold.Acquire holds it in another process: %v, %v; want false", path, ok, err)
	}
	stop()
	if ok, err := f.TryLock(); !ok || err != nil {
		t.Errorf("gofrs TryLock(%q) once hold let go: %v, %v", path, ok, err)
	}
	f.Unlock()
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Errorf("%s holds %q, %v: hold wrote into it", path, b, err)
	}
}
