package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

// Each refusal matches its own sentinel and fs.ErrPermission (so a caller
// that only asks "was I allowed?" sees it), says what happened, and has a
// hint that says what to do and that the file was left unchanged.
func TestRefusalsMatchAndExplain(t *testing.T) {
	cause := syscall.EPERM
	cases := []struct {
		err      error
		sentinel error
		says     []string
		hint     string
	}{
		{&SymlinkError{Link: "/tmp/l", Dir: "/tmp", LinkUID: 4242, DirUID: 0, UID: 1000}, ErrProtectedSymlink,
			[]string{"/tmp/l", "uid 4242", "uid 0", "uid 1000", "sticky world-writable", "protected_symlinks"}, "readlink /tmp/l"},
		{&HardLinkError{Path: "/d/f", Links: 2}, ErrHardLinked,
			[]string{"/d/f has 2 hard links", "the other name keeps the old content"}, "--allow-split"},
		{&OwnerError{Path: "/d/f", UID: 4242, GID: 4343, Self: 1000, Err: cause}, ErrOwnerNotKept,
			[]string{"/d/f belongs to uid 4242", "gid 4343", "runs as uid 1000", "only root may give a file to another user", cause.Error()}, "run the update as uid 4242 or as root"},
		{&OwnerError{Path: "/d/f", UID: 1000, GID: 4343, Self: 1000}, ErrOwnerNotKept,
			[]string{"/d/f has group gid 4343", "is not a member of it"}, "run the update as a member of gid 4343"},
		{&XattrError{Path: "/d/f", Name: "user.x", Op: "copy", Err: cause}, ErrXattrNotKept,
			[]string{"cannot copy extended attribute user.x", cause.Error()}, "would have lost the attribute"},
		{&XattrError{Path: "/d/f", Name: "security.selinux", Op: "copy", Err: cause}, ErrXattrNotKept,
			[]string{"security.selinux"}, "takes privilege"},
		{&XattrError{Path: "/d/f", Name: aclAccess, Op: "remove", Err: cause}, ErrXattrNotKept,
			[]string{"from the directory", "cannot be removed"}, "left unchanged"},
	}
	for _, c := range cases {
		err := fmt.Errorf("wrapped: %w", c.err)
		if !errors.Is(err, c.sentinel) || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("%T %v does not match %v and fs.ErrPermission", c.err, c.err, c.sentinel)
		}
		for _, other := range []error{ErrProtectedSymlink, ErrHardLinked, ErrOwnerNotKept, ErrXattrNotKept, ErrEmpty} {
			if other != c.sentinel && errors.Is(err, other) {
				t.Errorf("%T matches %v too", c.err, other)
			}
		}
		for _, s := range c.says {
			if !strings.Contains(c.err.Error(), s) {
				t.Errorf("%T does not say %q: %v", c.err, s, c.err)
			}
		}
		if h := Hint(err); !strings.Contains(h, c.hint) {
			t.Errorf("hint of %T is %q, want it to say %q", c.err, h, c.hint)
		}
	}
	if he := (&HardLinkError{Path: "f", Links: 4}); !strings.Contains(he.Error(), "the other 3 names keep") {
		t.Errorf("four links: %v", he)
	}
	for _, e := range []error{&OwnerError{Err: cause}, &XattrError{Err: cause}, &NotDurableError{Err: cause}} {
		if !errors.Is(e, cause) {
			t.Errorf("%T does not unwrap to its cause", e)
		}
	}
}

func TestEmptyError(t *testing.T) {
	existing := &EmptyError{Path: "/d/f"}
	missing := &EmptyError{Path: "/d/new", Missing: true}
	for _, e := range []error{existing, missing} {
		if !errors.Is(e, ErrEmpty) || errors.Is(e, fs.ErrPermission) {
			t.Errorf("%v: matches ErrEmpty %v, fs.ErrPermission %v; want only ErrEmpty", e, errors.Is(e, ErrEmpty), errors.Is(e, fs.ErrPermission))
		}
	}
	if !strings.Contains(existing.Error(), "left as it was") || !strings.Contains(Hint(existing), "AllowEmpty") {
		t.Errorf("empty content for an existing file: %v (hint %q)", existing, Hint(existing))
	}
	if !strings.Contains(missing.Error(), "/d/new does not exist: nothing was created") || !strings.Contains(Hint(missing), "create the file first") {
		t.Errorf("empty content for a missing file: %v (hint %q)", missing, Hint(missing))
	}
}

// Hint advises on the system's errors too, and says nothing of others.
func TestHint(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "open", Path: "f", Err: ErrReadOnly}, "chmod u+w"},
		{&fs.PathError{Op: "write", Path: "f", Err: syscall.ENOSPC}, "the disk is full"},
		{&fs.PathError{Op: "open", Path: "f", Err: syscall.EACCES}, "must be writable"},
		{&fs.PathError{Op: "open", Path: "f", Err: syscall.EROFS}, "must be writable"},
		{errors.New("something else"), ""},
		{nil, ""},
	}
	for _, c := range cases {
		if h := Hint(c.err); (c.want == "") != (h == "") || !strings.Contains(h, c.want) {
			t.Errorf("Hint(%v) = %q, want it to say %q", c.err, h, c.want)
		}
	}
	if !errors.Is(ErrReadOnly, fs.ErrPermission) {
		t.Error("ErrReadOnly does not match fs.ErrPermission")
	}
}

func TestWarnings(t *testing.T) {
	nd := &NotDurableError{Path: "/d/f", Err: syscall.EIO}
	if s := nd.Error(); !strings.Contains(s, "/d/f was updated") || !strings.Contains(s, "may not survive a crash") {
		t.Errorf("NotDurableError says %q", s)
	}
	oc := &OwnerChange{Path: "/d/f", FromUID: 4242, FromGID: 4343, ToUID: 1000, ToGID: 4343}
	if s := oc.Error(); !strings.Contains(s, "/d/f now belongs to uid 1000") || !strings.Contains(s, "group gid 4343") || !strings.Contains(s, "it belonged to uid 4242") {
		t.Errorf("OwnerChange says %q", s)
	}
}

// Names come from the passwd and group files where they are known; the
// number alone otherwise.
func TestUserAndGroupNames(t *testing.T) {
	if s := userName(1<<30 + 7); s != fmt.Sprint("uid ", 1<<30+7) {
		t.Errorf("an unknown user is %q", s)
	}
	if s := groupName(1<<30 + 7); s != fmt.Sprint("gid ", 1<<30+7) {
		t.Errorf("an unknown group is %q", s)
	}
	if idName("/etc/passwd", 0) == "root" {
		if s := userName(0); s != "uid 0 (root)" {
			t.Errorf("root is %q", s)
		}
	}
}
