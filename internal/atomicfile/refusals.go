package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// The refusals: what an update will not do because the result would not be
// the file it replaces, or would not be the file the caller named. Each
// comes as a richer error (below) that matches its sentinel and
// fs.ErrPermission, as ErrReadOnly does, so a caller that only asks "was I
// allowed?" need not know them all.
var (
	// ErrProtectedSymlink: a symlink that the kernel's fs.protected_symlinks
	// rule would not let this process follow.
	ErrProtectedSymlink = errors.New("symlink not followed: it is in a sticky world-writable directory and owned by someone else")
	// ErrHardLinked: the file has other names, which a replacement by
	// rename would leave with the old content.
	ErrHardLinked = errors.New("file has other hard links, which an update would split off")
	// ErrOwnerNotKept: the replacement cannot be given the file's owner and
	// group.
	ErrOwnerNotKept = errors.New("the replacement cannot keep the file's owner and group")
	// ErrXattrNotKept: an extended attribute (an ACL, an SELinux label, a
	// user.* attribute) cannot be copied to the replacement.
	ErrXattrNotKept = errors.New("an extended attribute cannot be kept")
)

// ErrEmpty: the new content of an update is empty (see Options.AllowEmpty).
var ErrEmpty = errors.New("the new content is empty; the file was left as it was")

// EmptyError is an update refused for its empty new content. It matches
// ErrEmpty.
type EmptyError struct {
	Path string
	// Missing: the file did not exist, so the old content was empty
	// too; nothing was created.
	Missing bool
}

func (e *EmptyError) Error() string {
	if e.Missing {
		return "the new content is empty, and " + e.Path + " does not exist: nothing was created"
	}
	return ErrEmpty.Error()
}

func (e *EmptyError) Is(target error) bool { return target == ErrEmpty }

func (e *EmptyError) hint() string {
	if e.Missing {
		return "create the file first with the content to start from, or produce content from empty input; allowing empty content would not create it either"
	}
	return "allow empty content to empty the file with hold.AllowEmpty() in Go, hold update --allow-empty, or allow_empty in hold agent's update (allowEmpty in Node)"
}

// hinter is an error that knows what the user can do about it; Hint asks
// it first.
type hinter interface{ hint() string }

// SymlinkError is a symlink that resolve will not follow: it sits in a
// sticky world-writable directory (like /tmp) and belongs neither to this
// process's user nor to the directory's owner. Anyone may plant a link
// there, pointing anywhere; following it would write where the link's
// owner chose with the caller's rights. This is the kernel's
// fs.protected_symlinks rule, which hold would bypass by reading the link
// itself, so hold applies it whether or not the sysctl is on.
type SymlinkError struct {
	Link    string // the symlink
	Dir     string // the sticky world-writable directory it is in
	LinkUID int    // the link's owner
	DirUID  int    // the directory's owner
	UID     int    // this process's (effective) user
}

func (e *SymlinkError) Error() string {
	return fmt.Sprintf("symlink %s is owned by %s, in %s, a sticky world-writable directory owned by %s; "+
		"a link there is followed only for its owner or the directory's owner (the kernel's fs.protected_symlinks rule), and this process runs as %s",
		e.Link, userName(e.LinkUID), e.Dir, userName(e.DirUID), userName(e.UID))
}

func (e *SymlinkError) hint() string {
	return "if you trust the link, name the file it points to instead, which readlink " + e.Link + " shows; or run as the link's owner"
}

// Is matches ErrProtectedSymlink and fs.ErrPermission.
func (e *SymlinkError) Is(target error) bool {
	return target == ErrProtectedSymlink || target == fs.ErrPermission
}

// HardLinkError is a file with more than one name. An update writes a new
// file and renames it over one name; the other names keep the old file, so
// the update would be lost for anyone who uses them.
type HardLinkError struct {
	Path  string
	Links uint64 // the file's link count
}

func (e *HardLinkError) Error() string {
	others := "the other name keeps"
	if e.Links > 2 {
		others = fmt.Sprintf("the other %d names keep", e.Links-1)
	}
	return fmt.Sprintf("%s has %d hard links; an update writes a new file and renames it over this one name, so %s the old content", e.Path, e.Links, others)
}

func (e *HardLinkError) hint() string {
	return "allow that with --allow-split, hold.AllowSplit() or allow_split in hold agent's update (allowSplit in Node), or use append, which writes in place; the file was left unchanged"
}

// Is matches ErrHardLinked and fs.ErrPermission.
func (e *HardLinkError) Is(target error) bool {
	return target == ErrHardLinked || target == fs.ErrPermission
}

// OwnerError is a file whose owner or group the replacement cannot have:
// only root may give a file to another user, and only a member of a group
// may give a file to that group. The replacement is a new file, created by
// this process, so it would otherwise belong to this process's user and
// group, and the file's owner could lose access to it.
type OwnerError struct {
	Path     string
	UID, GID int // the file's owner and group
	Self     int // this process's effective user
	Err      error
}

func (e *OwnerError) Error() string {
	var s string
	if e.UID == e.Self {
		s = fmt.Sprintf("%s has group %s, and this process (running as %s) is not a member of it; "+
			"an update replaces the file with a new one, and only root or a member may give a file that group",
			e.Path, groupName(e.GID), userName(e.Self))
	} else {
		s = fmt.Sprintf("%s belongs to %s, group %s, and this process runs as %s; "+
			"an update replaces the file with a new one, and only root may give a file to another user",
			e.Path, userName(e.UID), groupName(e.GID), userName(e.Self))
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *OwnerError) hint() string {
	who := userName(e.UID)
	if e.UID == e.Self {
		who = "a member of " + groupName(e.GID)
	}
	return "run the update as " + who + " or as root, or let the file change owner with --allow-owner-change, hold.AllowOwnerChange() or allow_owner_change in hold agent's update (allowOwnerChange in Node); append writes in place and keeps the owner; the file was left unchanged"
}

// Is matches ErrOwnerNotKept and fs.ErrPermission.
func (e *OwnerError) Is(target error) bool {
	return target == ErrOwnerNotKept || target == fs.ErrPermission
}

// Unwrap returns the chown error, if there was one.
func (e *OwnerError) Unwrap() error { return e.Err }

// XattrError is an extended attribute of the file that cannot be copied to
// the replacement (or, for an ACL the replacement inherited from its
// directory's default ACL, removed from it). Setting security.* and
// trusted.* attributes takes privilege; a file system may not support an
// attribute at all.
type XattrError struct {
	Path string
	Name string // the attribute
	Op   string // "copy" or "remove"
	Err  error
}

func (e *XattrError) Error() string {
	if e.Op == "remove" {
		return fmt.Sprintf("%s: the replacement got extended attribute %s (from the directory) that the file does not have, and it cannot be removed: %v", e.Path, e.Name, e.Err)
	}
	return fmt.Sprintf("%s: cannot copy extended attribute %s to the replacement: %v", e.Path, e.Name, e.Err)
}

func (e *XattrError) hint() string {
	if strings.HasPrefix(e.Name, "security.") || strings.HasPrefix(e.Name, "trusted.") {
		return "setting " + e.Name + " takes privilege: run the update as root, or remove the attribute first; the file was left unchanged"
	}
	return "the file was left unchanged, since the replacement would have lost the attribute"
}

// Is matches ErrXattrNotKept and fs.ErrPermission.
func (e *XattrError) Is(target error) bool {
	return target == ErrXattrNotKept || target == fs.ErrPermission
}

// Unwrap returns the system call's error.
func (e *XattrError) Unwrap() error { return e.Err }

// NotDurableError is handed to Options.Warn when the new content is in
// place but the directory could not be synced, so the rename may not
// survive a crash of the machine. The update is done: it is not returned
// as an error, since a caller that retried would apply it twice.
type NotDurableError struct {
	Path string
	Err  error
}

func (e *NotDurableError) Error() string {
	return fmt.Sprintf("%s was updated, but its directory could not be synced, so the change may not survive a crash of the machine: %v", e.Path, e.Err)
}

// Unwrap returns the sync error.
func (e *NotDurableError) Unwrap() error { return e.Err }

// OwnerChange is handed to Options.Warn after an update that
// AllowOwnerChange let change the file's owner or group: it says what
// happened.
type OwnerChange struct {
	Path             string
	FromUID, FromGID int
	ToUID, ToGID     int
}

func (e *OwnerChange) Error() string {
	return fmt.Sprintf("%s now belongs to %s, group %s (it belonged to %s, group %s): only root may give a new file another user's ownership",
		e.Path, userName(e.ToUID), groupName(e.ToGID), userName(e.FromUID), groupName(e.FromGID))
}

// userName is "uid N (name)", or "uid N" when the name is unknown.
func userName(uid int) string {
	s := "uid " + strconv.Itoa(uid)
	if name := idName("/etc/passwd", uid); name != "" {
		s += " (" + name + ")"
	}
	return s
}

// groupName is "gid N (name)", or "gid N" when the name is unknown.
func groupName(gid int) string {
	s := "gid " + strconv.Itoa(gid)
	if name := idName("/etc/group", gid); name != "" {
		s += " (" + name + ")"
	}
	return s
}

// idName returns the name that the passwd or group file gives id (its
// lines are NAME:PASSWORD:ID:...), or "". os/user would also ask NSS
// (LDAP and the like), but only through libc: importing it makes every
// hold binary built with a C compiler dynamically linked, which costs
// each start the dynamic loader. A name missing here only leaves the
// number in a message.
func idName(file string, id int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	want := strconv.Itoa(id)
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 4)
		if len(f) >= 3 && f[2] == want && f[0] != "" && !strings.HasPrefix(f[0], "#") {
			return f[0]
		}
	}
	return ""
}
