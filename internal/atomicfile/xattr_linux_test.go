package atomicfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"

	"golang.org/x/sys/unix"
)

// Extended attributes and ACLs: the replacement carries them, or the
// update is refused. The ACLs are written as the kernel stores them (what
// setfacl writes), so no tool beyond the kernel is needed.

// aclEntry is one entry of a POSIX ACL in the xattr format of
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

func setXattrOf(t *testing.T, path, name string, value []byte) {
	t.Helper()
	err := unix.Setxattr(path, name, value, 0)
	if errors.Is(err, unix.ENOTSUP) {
		t.Skipf("the file system of %s refuses %s: %v", path, name, err)
	}
	if err != nil {
		t.Fatalf("setxattr %s: %v", name, err)
	}
}

func getXattrOf(t *testing.T, path, name string) ([]byte, bool) {
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

// OS.Xattrs lists every attribute with its value, an empty one and a
// large one included.
func TestXattrsListed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "x", 0o644)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if xs, err := (OS{}).Xattrs(f); err != nil || len(xs) != 0 {
		t.Fatalf("a file without attributes lists %v, %v", xs, err)
	}
	want := map[string][]byte{"user.empty": {}, "user.big": bytes.Repeat([]byte("v"), 3000)}
	for i := range 20 {
		want[fmt.Sprintf("user.attribute-with-a-long-name-%02d", i)] = []byte{byte(i)}
	}
	for name, v := range want {
		setXattrOf(t, path, name, v)
	}
	xs, err := (OS{}).Xattrs(f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, x := range xs {
		got[x.Name] = x.Value
	}
	if len(got) != len(want) {
		t.Errorf("listed %d attributes, want %d", len(got), len(want))
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || !bytes.Equal(g, v) {
			t.Errorf("%s: %q (listed %v), want %q", name, g, ok, v)
		}
	}
}

// An update keeps the file's ACL and its user.* attributes, byte for byte,
// and the permission bits that go with the ACL.
func TestUpdateKeepsXattrsAndACL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.json")
	writeFile(t, path, `{"n":1}`, 0o640)
	acl := grantUser(testenv.Someone)
	setXattrOf(t, path, aclAccess, acl)
	setXattrOf(t, path, "user.test", []byte("kept"))
	setXattrOf(t, path, "user.empty", nil)
	before, _ := os.Stat(path)

	if err := UpdateWith(OS{}, path, Options{}, setTo(`{"n":2}`), nil); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if os.SameFile(before, after) {
		t.Fatal("the update did not replace the file, so it tests nothing")
	}
	if v, ok := getXattrOf(t, path, aclAccess); !ok || !bytes.Equal(v, acl) {
		t.Errorf("ACL after the update: %x (present %v), want %x", v, ok, acl)
	}
	if v, ok := getXattrOf(t, path, "user.test"); !ok || string(v) != "kept" {
		t.Errorf("user.test after the update: %q (present %v)", v, ok)
	}
	if v, ok := getXattrOf(t, path, "user.empty"); !ok || len(v) != 0 {
		t.Errorf("user.empty after the update: %q (present %v)", v, ok)
	}
	if after.Mode() != before.Mode() {
		t.Errorf("mode %v, want %v", after.Mode(), before.Mode())
	}
}

// A directory's default ACL gives every new file in it an ACL; the
// replacement of a file that has none must not get one, since it would
// change who may read and write it. One that cannot be removed refuses
// the update.
func TestUpdateDropsInheritedACL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "private")
	writeFile(t, path, "mine\n", 0o600)
	setXattrOf(t, dir, "system.posix_acl_default", grantUser(testenv.Someone))
	if _, ok := getXattrOf(t, path, aclAccess); ok {
		t.Fatal("the file has an ACL before the test")
	}
	before := snap(t, path)
	err := UpdateWith(&faultFS{xattrName: aclAccess, xattrErr: syscall.EPERM}, path, Options{}, setTo("still mine\n"), nil)
	var xe *XattrError
	if !errors.As(err, &xe) || xe.Op != "remove" || xe.Name != aclAccess || !errors.Is(err, syscall.EPERM) {
		t.Fatalf("an inherited ACL that cannot be removed: %v, want an *XattrError of its removal", err)
	}
	if !strings.Contains(err.Error(), "from the directory") {
		t.Errorf("unclear error: %v", err)
	}
	before.unchanged(t)

	if err := UpdateWith(OS{}, path, Options{}, setTo("still mine\n"), nil); err != nil {
		t.Fatal(err)
	}
	if v, ok := getXattrOf(t, path, aclAccess); ok {
		t.Errorf("the replacement inherited an ACL the file did not have: %x", v)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if s := readFile(t, path); s != "still mine\n" {
		t.Errorf("content %q", s)
	}
}

// An attribute that cannot be copied (here: the file system refuses it)
// stops the update before anything is published, naming the attribute;
// so do attributes that cannot be listed.
func TestUpdateRefusesXattrItCannotCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original\n", 0o644)
	setXattrOf(t, path, "user.test", []byte("kept"))
	before := snap(t, path)
	err := UpdateWith(&faultFS{xattrName: "user.test", xattrErr: syscall.ENOTSUP}, path, Options{}, setTo("new\n"), nil)
	var xe *XattrError
	if !errors.As(err, &xe) || xe.Op != "copy" || xe.Name != "user.test" || xe.Path != path {
		t.Fatalf("an attribute that cannot be copied: %v, want an *XattrError naming it", err)
	}
	if !errors.Is(err, ErrXattrNotKept) || !errors.Is(err, fs.ErrPermission) || !errors.Is(err, syscall.ENOTSUP) || !strings.Contains(err.Error(), "user.test") {
		t.Errorf("error does not match its kinds or name the attribute and its cause: %v", err)
	}
	before.unchanged(t)

	err = UpdateWith(&faultFS{listErr: syscall.EIO}, path, Options{}, setTo("new\n"), nil)
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "listxattr" || !errors.Is(err, syscall.EIO) {
		t.Errorf("attributes that cannot be listed: %v, want a listxattr error", err)
	}
	before.unchanged(t)
}

// A file capability (security.capability) can be set only with
// CAP_SETFCAP: an unprivileged owner's update is refused, naming it, and
// root's update keeps it (and the owner).
func TestUpdateFileCapability(t *testing.T) {
	testenv.NeedRoot(t, "setting a file capability, and a worker running as another user")
	base, run := asNobody(t)
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
	setXattrOf(t, path, "security.capability", capability)
	before := snap(t, path)

	code, out := run("update", path)
	if code != 0 || !strings.Contains(out, "security.capability") || !strings.Contains(out, "hint: setting security.capability takes privilege") {
		t.Errorf("unprivileged update of a file with a capability: worker exit %d, want 0 (refused) naming the attribute; output: %s", code, out)
	}
	before.unchanged(t)
	if v, ok := getXattrOf(t, path, "security.capability"); !ok || !bytes.Equal(v, capability) {
		t.Errorf("capability after the refused update: %x (present %v)", v, ok)
	}

	if err := UpdateWith(OS{}, path, Options{}, setTo("by root\n"), nil); err != nil {
		t.Fatal(err)
	}
	if v, ok := getXattrOf(t, path, "security.capability"); !ok || !bytes.Equal(v, capability) {
		t.Errorf("capability after root's update: %x (present %v), want %x", v, ok, capability)
	}
	if uid, _ := ownerOfFile(t, path); uid != nobody {
		t.Errorf("root's update gave the file to uid %d", uid)
	}
}
