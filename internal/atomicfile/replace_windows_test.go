package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A file open without FILE_SHARE_DELETE (Go's os.Open) blocks its
// replacement while it is open: rename waits for it to close, and gives
// up after replaceWait with the file unchanged and an error that says why.
// (Where rename falls back to MoveFileEx, as under wine, any open handle
// blocks it, openFile's too: publish closes the original first.)
func TestWindowsReplaceWaitsForOpenFile(t *testing.T) {
	dir := t.TempDir()
	target, next := filepath.Join(dir, "f"), filepath.Join(dir, "next")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(target, "old")

	own, err := openFile(target, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	reader, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	write(next, "new")
	start := time.Now()
	err = rename(next, target)
	var oe *openElsewhereError
	if !errors.As(err, &oe) || time.Since(start) < replaceWait || !strings.Contains(Hint(err), "close the program") {
		t.Fatalf("rename over a file open without share-delete: %v after %v (hint %q); want a refusal after %v", err, time.Since(start), Hint(err), replaceWait)
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Fatalf("the refused replacement changed the file: %q", b)
	}

	// The reader closes while rename waits: the replacement goes through.
	own.Close()
	go func() {
		time.Sleep(300 * time.Millisecond)
		reader.Close()
	}()
	if err := rename(next, target); err != nil {
		t.Fatalf("rename after the reader closed: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Fatalf("after the replacement the file reads %q", b)
	}
}
