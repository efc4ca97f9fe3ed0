package hold

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/atomicfile"
)

func TestAppendCreatesAndAppends(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	for _, s := range []string{"one\n", "two\n", ""} {
		if err := Append(context.Background(), path, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if s := readFile(t, path); s != "one\ntwo\n" {
		t.Errorf("content %q", s)
	}
	checkNotLocked(t, path)

	err := Append(context.Background(), filepath.Join(dir, "absent"), []byte("x"), MustExist())
	checkHoldError(t, err, "append", fs.ErrNotExist)
	if _, err := os.Stat(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("MustExist created the file: %v", err)
	}

	err = Append(context.Background(), dir, []byte("x"))
	checkHoldError(t, err, "append", syscall.EISDIR)

	ro := filepath.Join(dir, "ro")
	writeFile(t, ro, "keep\n", 0o444)
	err = Append(context.Background(), ro, []byte("x"))
	checkHoldError(t, err, "append", atomicfile.ErrReadOnly)
	if s := readFile(t, ro); s != "keep\n" {
		t.Errorf("read-only file changed: %q", s)
	}
}

func TestAppendThroughSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	writeFile(t, real, "a\n", 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink("real", link)
	if err := Append(context.Background(), link, []byte("b\n")); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, real); s != "a\nb\n" {
		t.Errorf("target content %q", s)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&fs.ModeSymlink == 0 {
		t.Error("the link is no longer a link")
	}
}

// A failed or short write, or a failed fsync, must leave no partial record.
func TestAppendFailureTruncatesBack(t *testing.T) {
	eachWriteFault(t, nil, func(t *testing.T, c faultCase) {
		path := filepath.Join(t.TempDir(), "log")
		writeFile(t, path, "first record\n", 0o644)
		err := appendTo(context.Background(), c.fs, path, []byte(strings.Repeat("torn? ", 1000)+"\n"), nil)
		checkHoldError(t, err, "append", c.want)
		if s := readFile(t, path); s != "first record\n" {
			t.Errorf("after a failed append the file is %d bytes, want the original 13", len(s))
		}
		checkNotLocked(t, path)
	})
}

// TestAppendConcurrentProcesses: 16 processes append 100 records each to
// one file through hold.Append; every record must be there once and whole.
func TestAppendConcurrentProcesses(t *testing.T) {
	const procs, each = 16, 100
	path := filepath.Join(t.TempDir(), "queue.md")
	runGuardedWorkers(t, procs, func(i int) []string {
		return []string{"guarded-append", "GUARDED_FILE=" + path, fmt.Sprint("GUARDED_ID=", i), fmt.Sprint("GUARDED_N=", each)}
	})
	checkRecords(t, path, procs, each)
}

// checkRecords checks that path holds exactly the records of procs
// writers with each records apiece, every one whole and once.
func checkRecords(t *testing.T, path string, procs, each int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := make(map[[2]int]int)
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		lines++
		id, j, ok := parseRecord(sc.Text())
		if !ok {
			t.Fatalf("line %d is torn or interleaved: %.80q", lines, sc.Text())
		}
		seen[[2]int{id, j}]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range procs {
		for j := range each {
			if n := seen[[2]int{id, j}]; n != 1 {
				t.Errorf("record w%d r%d present %d times", id, j, n)
			}
		}
	}
	if lines != procs*each {
		t.Errorf("%d lines, want %d", lines, procs*each)
	}
}
