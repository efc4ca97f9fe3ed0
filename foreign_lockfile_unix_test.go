//go:build unix

package hold_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
)

// A lock path that is a hard link to another file (a mistake, or a trap
// laid in a shared directory) is never written through: the other file
// keeps its content.
func TestHardLinkedLockFile(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "precious")
	content := []byte("") // empty, so only the link count tells
	if err := os.WriteFile(other, content, 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "t")
	if err := os.Link(other, target+".lock"); err != nil {
		t.Fatal(err)
	}
	_, err := hold.Acquire(context.Background(), target)
	he := holdError(t, "derived path, hard link", err, hold.ErrForeign)
	if !strings.Contains(he.Hint, "hard link") {
		t.Errorf("hint %q does not say it is a hard link", he.Hint)
	}
	l, err := hold.Acquire(context.Background(), "", hold.LockFile(target+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 0 || !errors.Is(l.TokenError(), hold.ErrForeign) {
		t.Errorf("token %d, TokenError %v; want 0, matching ErrForeign", l.Token(), l.TokenError())
	}
	l.Release()
	if b, _ := os.ReadFile(other); !bytes.Equal(b, content) {
		t.Fatalf("the linked file now holds %q", b)
	}
}

// Running as root, hold does not write into another user's lock file,
// even an empty one: it locks it as it locks a file it may not write.
func TestRootDoesNotWriteOthersLockFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root): checks what root does with another user's file")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	if err := os.WriteFile(target+".lock", nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(target+".lock", otherUser, otherUser); err != nil {
		t.Fatal(err)
	}
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 0 || !errors.Is(l.TokenError(), hold.ErrNoToken) {
		t.Errorf("token %d, TokenError %v; want 0 and ErrNoToken", l.Token(), l.TokenError())
	}
	_, err = hold.TryAcquire(target)
	holdError(t, "another holder", err, hold.ErrBusy)
	l.Release()
	if b, _ := os.ReadFile(target + ".lock"); len(b) != 0 {
		t.Fatalf("root wrote %q into uid %d's lock file", b, otherUser)
	}
}

// After release, nothing of the holder but the fencing token stays on
// disk: no command line (which may carry secrets), no fields. While held,
// the command line is recorded with secrets masked, or not at all when
// asked.
func TestReleaseLeavesNoPrivateData(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	l, err := hold.Acquire(context.Background(), target, hold.Field("customer", "ACME-SECRET-PLAN"))
	if err != nil {
		t.Fatal(err)
	}
	l.Token() // the record is written once the token is asked for
	held, _ := os.ReadFile(target + ".lock")
	if !bytes.Contains(held, []byte("ACME-SECRET-PLAN")) || !bytes.Contains(held, []byte(`"command"`)) {
		t.Fatalf("while held the record lacks the fields or the command: %s", held)
	}
	token := l.Token()
	l.Release()
	after, _ := os.ReadFile(target + ".lock")
	for _, leak := range []string{"ACME", "customer", "command", `"pid"`, os.Args[0]} {
		if bytes.Contains(after, []byte(leak)) {
			t.Errorf("after release the lock file still holds %q: %s", leak, after)
		}
	}
	st, err := hold.Inspect(target)
	if err != nil || st.Fence != token || st.State != hold.Free {
		t.Fatalf("Inspect after release: %+v, %v; want free with fence %d", st, err, token)
	}
	l, err = hold.Acquire(context.Background(), target)
	if err != nil || l.Token() != token+1 {
		t.Fatalf("next token %v, %v; want %d", l, err, token+1)
	}
	l.Release()

	l, err = hold.Acquire(context.Background(), target, hold.OmitCommand())
	if err != nil {
		t.Fatal(err)
	}
	l.Token()
	if o := l.Owner(); len(o.Command) != 0 {
		t.Errorf("OmitCommand: the record has the command %q", o.Command)
	}
	held, _ = os.ReadFile(target + ".lock")
	if bytes.Contains(held, []byte(`"command"`)) {
		t.Errorf("OmitCommand: the lock file has a command: %s", held)
	}
	l.Release()
}

// Update and Append refuse a lock file that is the very file they change,
// and write nothing: the lock would guard nothing, and the record would
// land in the data.
func TestGuardedRefusesLockOnTarget(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "up.json")
	content := []byte(`{"items":[1,2,3]}` + "\n")
	if err := os.WriteFile(data, content, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "alias")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	called := false
	for _, lockFile := range []string{data, link, dir + "/./up.json"} {
		err := hold.Update(context.Background(), data, func(old []byte) ([]byte, error) {
			called = true
			return []byte("{}"), nil
		}, hold.LockFile(lockFile))
		holdError(t, "update, lock file "+lockFile, err, hold.ErrLockIsTarget)
		err = hold.Append(context.Background(), data, []byte("more\n"), hold.LockFile(lockFile))
		holdError(t, "append, lock file "+lockFile, err, hold.ErrLockIsTarget)
	}
	if called {
		t.Error("the update function ran")
	}
	if b, _ := os.ReadFile(data); !bytes.Equal(b, content) {
		t.Fatalf("the data changed: %q", b)
	}
	if names := dirNames(t, dir); len(names) != 2 {
		t.Fatalf("the directory holds %v, want only the data and the symlink", names)
	}
}

// The same refusal through every entry point that derives a lock path:
// Named, Fair, the portable protocol, Update and Append. Nothing is
// written, nothing deleted.
func TestForeignContentEveryEntryPoint(t *testing.T) {
	data := "# This file is automatically @generated by Cargo.\nversion = 3\n"
	check := func(t *testing.T, lockPath, what string, err error) {
		t.Helper()
		holdError(t, what, err, hold.ErrForeign)
		if b, _ := os.ReadFile(lockPath); string(b) != data {
			t.Fatalf("%s: %s now holds %q", what, lockPath, b)
		}
	}
	t.Run("named", func(t *testing.T) {
		dir := namedEnv(t)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		lockPath := filepath.Join(dir, "deploy.lock")
		os.WriteFile(lockPath, []byte(data), 0o644)
		_, err := hold.TryAcquire("", hold.Named("deploy"))
		check(t, lockPath, "Named", err)
	})
	for _, c := range []struct {
		name string
		opts []hold.Option
	}{
		{"fair", []hold.Option{hold.Fair()}},
		{"portable", []hold.Option{hold.WithProtocol(portable.New())}},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "Cargo")
			os.WriteFile(target+".lock", []byte(data), 0o644)
			_, err := hold.Acquire(context.Background(), target, c.opts...)
			check(t, target+".lock", c.name+": Acquire", err)
			_, err = hold.TryAcquire(target, c.opts...)
			check(t, target+".lock", c.name+": TryAcquire", err)
		})
	}
	t.Run("guarded", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "Cargo")
		os.WriteFile(target, []byte("[package]\n"), 0o644)
		os.WriteFile(target+".lock", []byte(data), 0o644)
		err := hold.Update(context.Background(), target, func(old []byte) ([]byte, error) { return append(old, 'x'), nil })
		check(t, target+".lock", "Update", err)
		err = hold.Append(context.Background(), target, []byte("x"))
		check(t, target+".lock", "Append", err)
		if b, _ := os.ReadFile(target); string(b) != "[package]\n" {
			t.Fatalf("the target changed: %q", b)
		}
	})
}
