package hold

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Extended attributes and ACLs: the replacement must carry them, or the
// update must be refused. The ACLs are written as the kernel stores them
// (what setfacl writes), so no tool beyond the kernel is needed.

// posixACL encodes a POSIX ACL in the xattr format of
// system.posix_acl_access: a version, then (tag, permission, id) entries.
type aclEntry struct {
	tag  uint16
	perm uint16
	id   uint32
}

const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
	aclNoID     = 0xffffffff
)

func posixACL(entries ...aclEntry) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// grantUser is an ACL that gives user uid read and write, on a file whose
// permission bits are otherwise 0640.
func grantUser(uid uint32) []byte {
	return posixACL(
		aclEntry{aclUserObj, 6, aclNoID},
		aclEntry{aclUser, 6, uid},
		aclEntry{aclGroupObj, 4, aclNoID},
		aclEntry{aclMask, 6, aclNoID},
		aclEntry{aclOther, 0, aclNoID},
	)
}

func setXattr(t *testing.T, path, name string, value []byte) {
	t.Helper()
	err := unix.Setxattr(path, name, value, 0)
	if errors.Is(err, unix.ENOTSUP) {
		t.Skipf("the file system of %s refuses %s: %v", path, name, err)
	}
	if err != nil {
		t.Fatalf("setxattr %s: %v", name, err)
	}
}

func getXattr(t *testing.T, path, name string) ([]byte, bool) {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(path, name, buf)
	if errors.Is(err, unix.ENODATA) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("getxattr %s %s: %v", path, name, err)
	}
	return buf[:n], true
}

// An update keeps the file's ACL and its user.* attributes, byte for byte,
// and the permission bits that go with the ACL.
func TestUpdateKeepsXattrsAndACL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.json")
	writeFile(t, path, `{"n":1}`, 0o640)
	acl := grantUser(someone)
	setXattr(t, path, "system.posix_acl_access", acl)
	setXattr(t, path, "user.test", []byte("kept"))
	before, _ := os.Stat(path)

	if err := Update(context.Background(), path, setTo(`{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if os.SameFile(before, after) {
		t.Fatal("the update did not replace the file, so it tests nothing")
	}
	if v, ok := getXattr(t, path, "system.posix_acl_access"); !ok || !bytes.Equal(v, acl) {
		t.Errorf("ACL after the update: %x (present %v), want %x", v, ok, acl)
	}
	if v, ok := getXattr(t, path, "user.test"); !ok || string(v) != "kept" {
		t.Errorf("user.test after the update: %q (present %v)", v, ok)
	}
	if after.Mode() != before.Mode() {
		t.Errorf("mode %v, want %v", after.Mode(), before.Mode())
	}
}

// A directory's default ACL gives every new file in it an ACL; the
// replacement of a file that has none must not get one, since it would
// change who may read and write it.
func TestUpdateDropsInheritedACL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "private")
	writeFile(t, path, "mine\n", 0o600)
	setXattr(t, dir, "system.posix_acl_default", grantUser(someone))
	if _, ok := getXattr(t, path, "system.posix_acl_access"); ok {
		t.Fatal("the file has an ACL before the test")
	}
	if err := Update(context.Background(), path, setTo("still mine\n")); err != nil {
		t.Fatal(err)
	}
	if v, ok := getXattr(t, path, "system.posix_acl_access"); ok {
		t.Errorf("the replacement inherited an ACL the file did not have: %x", v)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

// An attribute that cannot be copied (here: the file system refuses it)
// stops the update before anything is published, naming the attribute.
func TestUpdateRefusesXattrItCannotCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original\n", 0o644)
	setXattr(t, path, "user.test", []byte("kept"))
	before, _ := os.Stat(path)
	fsys := &faultFS{xattrName: "user.test", xattrErr: syscall.ENOTSUP}
	err := update(context.Background(), fsys, path, setTo("new\n"), nil)
	checkHoldError(t, err, "update", ErrXattrNotKept)
	if !errors.Is(err, syscall.ENOTSUP) || !strings.Contains(err.Error(), "user.test") {
		t.Errorf("error does not name the attribute and its cause: %v", err)
	}
	after, _ := os.Stat(path)
	if s := readFile(t, path); s != "original\n" || !os.SameFile(before, after) {
		t.Errorf("the file changed: %q, same inode %v", s, os.SameFile(before, after))
	}
	if tmp := tempFiles(t, path); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

// A file capability (security.capability) can be set only with
// CAP_SETFCAP: an unprivileged owner's update is refused, naming it, and
// root's update keeps it.
func TestUpdateFileCapability(t *testing.T) {
	needRoot(t, "setting a file capability, and a worker running as another user")
	base, run := permWorker(t)
	dir := filepath.Join(base, "d")
	os.Mkdir(dir, 0o755)
	chownToWorker(t, dir)
	path := filepath.Join(dir, "tool")
	writeFile(t, path, "original\n", 0o755)
	chownToWorker(t, path)
	// cap_net_bind_service=ep, in the kernel's VFS_CAP_REVISION_2 format.
	capability := binary.LittleEndian.AppendUint32(nil, 0x02000001)
	capability = binary.LittleEndian.AppendUint32(capability, 1<<unix.CAP_NET_BIND_SERVICE)
	capability = append(capability, make([]byte, 12)...)
	setXattr(t, path, "security.capability", capability)
	lock := filepath.Join(base, "f.lock")
	writeFile(t, lock, "", 0o666)

	code, out := run("GUARDED_FILE="+path, "GUARDED_LOCK="+lock)
	if code != 0 || !strings.Contains(out, "security.capability") {
		t.Errorf("unprivileged update of a file with a capability: worker exit %d, want 0 (refused) naming the attribute; output: %s", code, out)
	}
	if s := readFile(t, path); s != "original\n" {
		t.Errorf("content %q", s)
	}
	if v, ok := getXattr(t, path, "security.capability"); !ok || !bytes.Equal(v, capability) {
		t.Errorf("capability after the refused update: %x (present %v)", v, ok)
	}

	if err := Update(context.Background(), path, setTo("by root\n"), LockFile(lock)); err != nil {
		t.Fatal(err)
	}
	if v, ok := getXattr(t, path, "security.capability"); !ok || !bytes.Equal(v, capability) {
		t.Errorf("capability after root's update: %x (present %v), want %x", v, ok, capability)
	}
	if uid, _ := ownerOfFile(t, path); uid != nobody {
		t.Errorf("root's update gave the file to uid %d", uid)
	}
}
