// Package atomicfile replaces and appends to files so that a reader, or a
// crash, never sees a torn result: a replacement is written to a temp file
// in the same directory, synced, given everything the original is (owner,
// group, permission bits, extended attributes and ACLs), renamed over the
// target and made durable by syncing the directory; an append that fails
// is cut back to the size before it.
//
// What a replacement cannot keep, it refuses before anything is published:
// another hard link to the file, an owner or group this process may not
// give, an extended attribute it may not set. A symlink is followed only
// where the kernel's fs.protected_symlinks rule would let this process
// follow it.
//
// Why not github.com/google/renameio/v2: it does not build on Windows, it
// does not sync the directory after the rename (so a crash can bring back
// the old name), it replaces a symlink instead of the file the link points
// to, by default it may put the temp file in $TMPDIR, and its temp names
// (".<base><digits>") cannot be told apart from a user's files, so abandoned
// ones cannot be cleaned up safely. It also offers no seam to inject a full
// disk in tests. The few lines below do all of that.
//
// Every operation goes through an FS, so tests can make any step fail.
// Locking is the caller's business: these functions assume the caller
// holds the target's lock.
package atomicfile

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/randname"
	"github.com/hold-dev/hold/lock"
)

// FS is the set of file system operations this package uses. OS is the
// real one; tests wrap it to fail chosen steps.
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	// Stat follows symlinks: it tells what directory a link really sits
	// in, as the kernel sees it.
	Stat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir makes the entries of directory name durable (a no-op where
	// the platform cannot sync a directory).
	SyncDir(name string) error
	// SyncFS makes durable everything written to the file system that
	// holds the file name. It stands in for SyncDir when the directory
	// cannot be opened (one the caller may write but not read).
	SyncFS(name string) error
	// Writable reports, without changing anything, an error when this
	// process may not write the existing file name.
	Writable(name string) error
	// Xattrs returns the extended attributes of f that this process can
	// read: none where the platform or the file system has none.
	Xattrs(f File) ([]Xattr, error)
	// SetXattr sets one extended attribute of f.
	SetXattr(f File, name string, value []byte) error
	// RemoveXattr removes one extended attribute of f.
	RemoveXattr(f File, name string) error
}

// File is an open file as FS returns it. *os.File implements it.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	Name() string
	// Fd is the descriptor, for the extended-attribute calls.
	Fd() uintptr
	Stat() (fs.FileInfo, error)
	Sync() error
	Truncate(size int64) error
	Chmod(mode fs.FileMode) error
	Chown(uid, gid int) error
	Close() error
}

// Xattr is one extended attribute.
type Xattr struct {
	Name  string
	Value []byte
}

// OS is the real file system.
type OS struct{}

// Lstat is os.Lstat.
func (OS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

// Stat is os.Stat.
func (OS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// Readlink is os.Readlink.
func (OS) Readlink(name string) (string, error) { return os.Readlink(name) }

// OpenFile is os.OpenFile (on Windows, a file opened only for reading
// shares delete access too: see replace_windows.go).
func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := openFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

// Rename is os.Rename on Unix; on Windows it replaces an existing file
// atomically too, waiting briefly for readers to close it (see
// replace_windows.go).
func (OS) Rename(oldpath, newpath string) error { return rename(oldpath, newpath) }

// Remove is os.Remove.
func (OS) Remove(name string) error { return os.Remove(name) }

// ReadDir is os.ReadDir.
func (OS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// SyncDir syncs directory name; see syncDir in the platform files.
func (OS) SyncDir(name string) error { return syncDir(name) }

// SyncFS syncs the file system of file name; see syncFS in the platform
// files.
func (OS) SyncFS(name string) error { return syncFS(name) }

// Writable checks write permission on name; see writable in the platform
// files.
func (OS) Writable(name string) error { return writable(name) }

// Xattrs lists and reads f's extended attributes; see listXattrs in the
// platform files.
func (OS) Xattrs(f File) ([]Xattr, error) { return listXattrs(int(f.Fd())) }

// SetXattr sets an extended attribute of f.
func (OS) SetXattr(f File, name string, value []byte) error {
	return setXattr(int(f.Fd()), name, value)
}

// RemoveXattr removes an extended attribute of f.
func (OS) RemoveXattr(f File, name string) error { return removeXattr(int(f.Fd()), name) }

// ErrNotRegular is the cause when the target exists but is not a regular
// file (a FIFO, a device, a socket). A directory gives syscall.EISDIR
// instead, the error everyone recognizes.
var ErrNotRegular = errors.New("not a regular file")

// ErrReadOnly is the cause when the target's permission bits allow nobody
// to write it. A replace by rename would succeed anyway (it needs only the
// directory's permission), and so would any write by root, but a file made
// read-only was made so on purpose. It matches fs.ErrPermission too.
var ErrReadOnly error = readOnlyError{}

type readOnlyError struct{}

func (readOnlyError) Error() string { return "file is read-only (no write permission bit set)" }

// Is makes errors.Is(err, fs.ErrPermission) hold, so callers that check
// for permission problems need not know about read-only files.
func (readOnlyError) Is(target error) bool { return target == fs.ErrPermission }

// maxLinks bounds symlink chains, as the kernel's ELOOP does.
const maxLinks = 40

// Target is a file to change, after symlinks are followed.
type Target struct {
	// Path is the file itself: the end of any symlink chain.
	Path string
	// Info is the file's Lstat result, nil when it does not exist.
	Info fs.FileInfo
}

// Resolve follows symlinks from path to the file they end at, which need
// not exist (a dangling link names the file to create), and checks that
// the file, if it exists, is a regular file we may write. A link that the
// kernel's fs.protected_symlinks rule would not let us follow is refused
// with a *SymlinkError.
func Resolve(fsys FS, path string) (*Target, error) { return resolve(fsys, path, true) }

// Locate is Resolve without asking the kernel whether this process may
// write the file: only its type and permission bits are checked, which
// the lstat that follows the links returns anyway. It serves callers for
// which that one system call is wasted: an append, whose open for writing
// asks the kernel the same question, and the check before a lock is
// taken, which is repeated in full under the lock.
func Locate(fsys FS, path string) (*Target, error) { return resolve(fsys, path, false) }

func resolve(fsys FS, path string, access bool) (*Target, error) {
	if strings.IndexByte(path, 0) >= 0 {
		// No system's path holds one: say so, rather than pass on the
		// system call's bare "invalid argument".
		return nil, fmt.Errorf("%w: a path cannot contain a NUL byte", lock.ErrInvalidName)
	}
	p := path
	for range maxLinks {
		fi, err := fsys.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return &Target{Path: p}, nil
		}
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			switch {
			case fi.IsDir():
				return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EISDIR}
			case !fi.Mode().IsRegular():
				return nil, &fs.PathError{Op: "open", Path: p, Err: ErrNotRegular}
			case fi.Mode().Perm()&0o222 == 0:
				return nil, &fs.PathError{Op: "open", Path: p, Err: ErrReadOnly}
			}
			if access {
				if err := fsys.Writable(p); err != nil {
					return nil, err
				}
			}
			return &Target{Path: p, Info: fi}, nil
		}
		if err := mayFollow(fsys, p, fi); err != nil {
			return nil, err
		}
		link, err := fsys.Readlink(p)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(p), link)
		}
		p = link
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: errors.New("too many levels of symbolic links")}
}

// mayFollow applies the kernel's fs.protected_symlinks rule to the link
// at p: in a directory that is sticky and world-writable (/tmp), a link is
// followed only when it belongs to this process's user or to the
// directory's owner. The kernel applies the rule when it follows a link
// itself; hold reads the last links of a path itself (to keep them links),
// so it must apply the rule too, and it does so whether or not the sysctl
// is on, since it cannot tell a victim's setting from a planted link.
func mayFollow(fsys FS, p string, link fs.FileInfo) error {
	linkUID, _, ok := ownerOf(link)
	if !ok {
		return nil // no owners to compare (Windows)
	}
	dir := filepath.Dir(p)
	di, err := fsys.Stat(dir)
	if err != nil {
		return err
	}
	if di.Mode()&fs.ModeSticky == 0 || di.Mode().Perm()&0o002 == 0 {
		return nil
	}
	dirUID, _, _ := ownerOf(di)
	self := os.Geteuid()
	if linkUID == self || linkUID == dirUID {
		return nil
	}
	return &SymlinkError{Link: p, Dir: dir, LinkUID: linkUID, DirUID: dirUID, UID: self}
}

// keptModeBits are the bits a replacement inherits from the original.
const keptModeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// Options are the choices of an update beyond its defaults, which keep
// everything the file is or refuse.
type Options struct {
	// MustExist makes a missing file an error (matching fs.ErrNotExist)
	// instead of empty content.
	MustExist bool
	// AllowSplit replaces a file that has other hard links; they keep
	// the old content. Without it such a file is refused (*HardLinkError).
	AllowSplit bool
	// AllowOwnerChange replaces a file whose owner (or group) this
	// process cannot give the replacement; the replacement then belongs
	// to this process's user, keeping the file's group where this
	// process may, and Warn gets an *OwnerChange. Without it such a file
	// is refused (*OwnerError) before fn runs.
	AllowOwnerChange bool
	// AllowEmpty accepts empty new content. Without it an update whose
	// new content is empty is refused (*EmptyError) and writes nothing:
	// a producer that failed without saying so would otherwise wipe the
	// file.
	AllowEmpty bool
	// Warn receives what the caller should know about an update that
	// succeeded: a directory that could not be synced after the rename
	// (*NotDurableError), an owner that changed (*OwnerChange). nil drops
	// them.
	Warn func(error)
}

func (o *Options) warn(err error) {
	if o.Warn != nil {
		o.Warn(err)
	}
}

// Update is UpdateWith with the default options, MustExist aside.
func Update(fsys FS, path string, mustExist bool, fn func(old []byte) ([]byte, error), check func() error) error {
	return UpdateWith(fsys, path, Options{MustExist: mustExist}, fn, check)
}

// UpdateWith is the read-modify-write of a file whose lock the caller
// holds. It resolves path (see Resolve), refuses what the replacement
// could not keep (see Open), reads the file (a missing one reads as
// empty unless o.MustExist), and calls fn. An error from fn is returned
// as it is and nothing is written; so is nothing when fn returns the
// bytes it got. Otherwise the new content is published (see publish),
// with check as its last step before the rename, and CleanStale then
// removes temp files that killed writers left.
func UpdateWith(fsys FS, path string, o Options, fn func(old []byte) ([]byte, error), check func() error) error {
	t, orig, err := Open(fsys, path, o)
	if err != nil {
		return err
	}
	var old []byte
	if orig != nil {
		defer orig.Close()
		if old, err = readAll(orig, t.Info.Size()); err != nil {
			return err
		}
	}
	data, err := fn(old)
	if err != nil {
		return err
	}
	if len(data) == 0 && !o.AllowEmpty {
		return &EmptyError{Path: path, Missing: orig == nil}
	}
	if bytes.Equal(old, data) {
		return nil
	}
	f, err := createTemp(fsys, t.Path, tempPerm(t))
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		discard(fsys, f)
		return err
	}
	if err := publish(fsys, f, t, orig, &o, check); err != nil {
		return err
	}
	CleanStale(fsys, t.Path)
	return nil
}

// UpdateStream is UpdateWith for content that need not fit in memory: fn
// reads the old content from old (empty for a missing file) and writes
// the new content to out, which goes straight to the temp file. A
// non-nil error from fn is returned as it is and nothing is published;
// new content equal to the old publishes nothing either. When the file
// exists, old is the file opened for reading (an *os.File with OS), so a
// child process can be given it as its stdin directly.
func UpdateStream(fsys FS, path string, o Options, fn func(old io.Reader, out io.Writer) error, check func() error) error {
	t, orig, err := Open(fsys, path, o)
	if err != nil {
		return err
	}
	var old io.Reader = strings.NewReader("")
	if orig != nil {
		defer orig.Close()
		old = orig
	}
	f, err := createTemp(fsys, t.Path, tempPerm(t))
	if err != nil {
		return err
	}
	if err := fn(old, writerOnly{f}); err != nil {
		discard(fsys, f)
		return err
	}
	if !o.AllowEmpty {
		if fi, err := f.Stat(); err != nil || fi.Size() == 0 {
			discard(fsys, f)
			if err != nil {
				return err
			}
			return &EmptyError{Path: path, Missing: orig == nil}
		}
	}
	same, err := sameContent(orig, t.Info, f)
	if err != nil || same {
		discard(fsys, f)
		return err
	}
	if err := publish(fsys, f, t, orig, &o, check); err != nil {
		return err
	}
	CleanStale(fsys, t.Path)
	return nil
}

// writerOnly hides everything of a File but Write, so that a child
// process given it as stdout writes through a pipe that hold copies
// from, not into the temp file's descriptor itself: a background process
// the child leaves behind must not be able to write into the file once it
// is published.
type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

// Open resolves path for an update (see Resolve), opens the file for
// reading and refuses, before anything is read or written, a file that a
// replacement would change in more than its content: one with other
// hard links (unless o.AllowSplit), or one whose owner and group this
// process cannot give the replacement (unless o.AllowOwnerChange). A
// missing file gives a nil File, or an error matching fs.ErrNotExist with
// o.MustExist. The Target's Info is then the open file's, so the checks
// and the copy of its metadata concern the file that is read.
func Open(fsys FS, path string, o Options) (*Target, File, error) {
	t, err := Resolve(fsys, path)
	if err != nil {
		return nil, nil, err
	}
	var f File
	if t.Info != nil {
		f, err = fsys.OpenFile(t.Path, os.O_RDONLY|noFollow, 0)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	if f == nil {
		if o.MustExist {
			return nil, nil, &fs.PathError{Op: "open", Path: t.Path, Err: fs.ErrNotExist}
		}
		t.Info = nil
		return t, nil, nil
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: "open", Path: t.Path, Err: ErrNotRegular}
	}
	if err == nil && !o.AllowSplit {
		if n := linkCount(fi); n > 1 {
			err = &HardLinkError{Path: t.Path, Links: n}
		}
	}
	if err == nil && !o.AllowOwnerChange {
		err = canKeepOwner(t.Path, fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	t.Info = fi
	return t, f, nil
}

// tempPerm is the temp file's permission until publish sets the
// original's: 0600 for a replacement, so that no one else reads a
// half-written copy, and for a new file what umask allows, like any
// created file.
func tempPerm(t *Target) fs.FileMode {
	if t.Info != nil {
		return 0o600
	}
	return 0o666
}

// discard closes and removes a temp file that will not be published.
func discard(fsys FS, f File) {
	f.Close()
	fsys.Remove(f.Name())
}

// readAll reads f from its start, sized by the stat taken at open.
func readAll(f File, size int64) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, size+512))
	_, err := buf.ReadFrom(f)
	return buf.Bytes(), err
}

// sameContent reports whether the temp file f, just written, holds what
// orig holds (nothing, when orig is nil), reading both in pieces.
func sameContent(orig File, info fs.FileInfo, f File) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if orig == nil {
		return fi.Size() == 0, nil
	}
	if fi.Size() != info.Size() {
		return false, nil
	}
	const chunk = 256 << 10
	a, b := make([]byte, chunk), make([]byte, chunk)
	for off := int64(0); off < fi.Size(); off += chunk {
		n := min(chunk, fi.Size()-off)
		if _, err := orig.ReadAt(a[:n], off); err != nil {
			return false, err
		}
		if _, err := f.ReadAt(b[:n], off); err != nil {
			return false, err
		}
		if !bytes.Equal(a[:n], b[:n]) {
			return false, nil
		}
	}
	return true, nil
}

// publish makes the temp file f, whose content is written, the file t: it
// gives f everything the original is (see keepMeta), syncs it, calls
// beforeRename, renames f over t and syncs the directory. If any step up
// to the rename fails, or beforeRename returns an error, f is removed and
// t is untouched. Once the rename is done the update is done, and publish
// returns nil: a directory sync that fails then is handed to o.Warn
// (*NotDurableError), since reporting a published update as failed would
// make a caller apply it twice.
func publish(fsys FS, f File, t *Target, orig File, o *Options, beforeRename func() error) (err error) {
	defer func() {
		if err != nil {
			discard(fsys, f)
		}
	}()
	var change *OwnerChange
	if t.Info != nil {
		if change, err = keepMeta(fsys, f, t, orig, o); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if beforeRename != nil {
		if err := beforeRename(); err != nil {
			return err
		}
	}
	// Windows' MoveFileEx cannot replace a file that a handle has open,
	// this process's own included; everything has been read from it.
	// (The caller's deferred Close of it then does nothing.)
	if orig != nil {
		orig.Close()
	}
	if err := fsys.Rename(f.Name(), t.Path); err != nil {
		return err
	}
	if change != nil {
		o.warn(change)
	}
	if err := syncDirOf(fsys, t.Path); err != nil {
		o.warn(&NotDurableError{Path: t.Path, Err: err})
	}
	return nil
}

// syncDirOf makes the new name of file durable by syncing its directory.
// A directory this process may write but not read cannot be opened to be
// synced; the file system that holds the file is synced instead, which
// covers the directory too.
func syncDirOf(fsys FS, file string) error {
	err := fsys.SyncDir(filepath.Dir(file))
	if errors.Is(err, fs.ErrPermission) {
		if ferr := fsys.SyncFS(file); ferr == nil {
			return nil
		}
	}
	return err
}

// keepMeta gives the temp file f what the original t is besides its
// content: owner and group, extended attributes (ACLs, SELinux labels,
// user.* attributes), permission bits. The order matters: chown clears
// the setuid and setgid bits and file capabilities, so it comes first;
// the mode comes last. It returns the owner change that
// o.AllowOwnerChange let happen, if any, to be reported once published.
func keepMeta(fsys FS, f File, t *Target, orig File, o *Options) (*OwnerChange, error) {
	change, err := keepOwner(f, t, o)
	if err != nil {
		return nil, err
	}
	if err := keepXattrs(fsys, f, t.Path, orig); err != nil {
		return nil, err
	}
	if err := f.Chmod(t.Info.Mode() & keptModeBits); err != nil {
		return nil, err
	}
	return change, nil
}

// keepOwner gives f the original's owner and group when it has not got
// them already (a setgid directory gives its group). Without privilege
// that fails for another user's file, which Open refused already unless
// o.AllowOwnerChange; then f keeps this process's user and, where this
// process may, the original's group.
func keepOwner(f File, t *Target, o *Options) (*OwnerChange, error) {
	uid, gid, ok := ownerOf(t.Info)
	if !ok {
		return nil, nil
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	tu, tg, _ := ownerOf(fi)
	if tu == uid && tg == gid {
		return nil, nil
	}
	err = f.Chown(uid, gid)
	if err == nil {
		return nil, nil
	}
	if !o.AllowOwnerChange {
		return nil, &OwnerError{Path: t.Path, UID: uid, GID: gid, Self: os.Geteuid(), Err: err}
	}
	if tg != gid && f.Chown(-1, gid) == nil {
		tg = gid
	}
	return &OwnerChange{Path: t.Path, FromUID: uid, FromGID: gid, ToUID: tu, ToGID: tg}, nil
}

// aclAccess is the extended attribute that holds a file's POSIX ACL.
const aclAccess = "system.posix_acl_access"

// keepXattrs copies orig's extended attributes to f, and removes an ACL
// that f inherited from its directory's default ACL but orig does not
// have: with an ACL the permission bits mean something else, so a
// replacement that gained or lost one could widen or narrow access. An
// attribute that cannot be copied is an *XattrError, and nothing is
// published. (Attributes this process cannot even list, trusted.* for a
// user other than root, are beyond its reach and are not kept.)
func keepXattrs(fsys FS, f File, path string, orig File) error {
	want, err := fsys.Xattrs(orig)
	if err != nil {
		return &fs.PathError{Op: "listxattr", Path: path, Err: err}
	}
	have, err := fsys.Xattrs(f)
	if err != nil {
		return &fs.PathError{Op: "listxattr", Path: f.Name(), Err: err}
	}
	got := make(map[string][]byte, len(have))
	for _, x := range have {
		got[x.Name] = x.Value
	}
	for _, x := range want {
		if v, ok := got[x.Name]; ok && bytes.Equal(v, x.Value) {
			delete(got, x.Name)
			continue
		}
		delete(got, x.Name)
		if err := fsys.SetXattr(f, x.Name, x.Value); err != nil {
			return &XattrError{Path: path, Name: x.Name, Op: "copy", Err: err}
		}
	}
	if _, extra := got[aclAccess]; extra {
		if err := fsys.RemoveXattr(f, aclAccess); err != nil {
			return &XattrError{Path: path, Name: aclAccess, Op: "remove", Err: err}
		}
	}
	return nil
}

// appendChunk is how much of a streamed append is written at a time.
const appendChunk = 1 << 20

// Append writes data to the end of t with one O_APPEND write and syncs it.
// If the write or the sync fails, the file is truncated back to its size
// before the write, so no partial record stays behind, and synced again.
// A file that did not exist is created (permission 0666 less umask) and
// its directory synced.
func Append(fsys FS, t *Target, data []byte) error {
	return appendWith(fsys, t, func(f File) error {
		_, err := f.Write(data)
		return err
	})
}

// appendWith opens t for appending, lets write write, syncs, and on any
// failure cuts the file back to its size before.
func appendWith(fsys FS, t *Target, write func(File) error) error {
	f, err := fsys.OpenFile(t.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|noFollow, 0o666)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &fs.PathError{Op: "open", Path: t.Path, Err: ErrNotRegular}
	}
	before := fi.Size()
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		if terr := f.Truncate(before); terr != nil {
			return fmt.Errorf("%w; and truncating back to %d bytes failed: %v", err, before, terr)
		}
		f.Sync() // best effort: the error above is the one to report
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if t.Info == nil {
		return fsys.SyncDir(filepath.Dir(t.Path))
	}
	return nil
}

// AppendTo is the append to a file whose lock the caller holds: it
// locates path (see Locate), refuses a missing file if mustExist, calls
// check (a lock that was lost must not write), and appends data with
// Append.
func AppendTo(fsys FS, path string, mustExist bool, data []byte, check func() error) error {
	t, err := locateForAppend(fsys, path, mustExist)
	if err != nil || len(data) == 0 {
		return err
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	return Append(fsys, t, data)
}

// AppendFrom is AppendTo for input that need not fit in memory: it copies
// all of r to the end of the file, a piece at a time, then syncs. A
// failure while copying (of r or of the file) cuts the file back to its
// size before, as a failed Append does. Input that is empty appends
// nothing (and creates no file).
func AppendFrom(fsys FS, path string, mustExist bool, r io.Reader, check func() error) error {
	t, err := locateForAppend(fsys, path, mustExist)
	if err != nil {
		return err
	}
	buf := make([]byte, appendChunk)
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF:
		return nil
	case err != nil && err != io.ErrUnexpectedEOF:
		return err
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	return appendWith(fsys, t, func(f File) error {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				return err
			}
			var rerr error
			n, rerr = io.ReadFull(r, buf)
			switch {
			case rerr == io.EOF:
				return nil
			case rerr != nil && rerr != io.ErrUnexpectedEOF:
				return rerr
			}
		}
	})
}

func locateForAppend(fsys FS, path string, mustExist bool) (*Target, error) {
	t, err := Locate(fsys, path)
	if err != nil {
		return nil, err
	}
	if t.Info == nil && mustExist {
		return nil, &fs.PathError{Op: "open", Path: t.Path, Err: fs.ErrNotExist}
	}
	return t, nil
}

// Hint says what to do about an error of this package, or "".
func Hint(err error) string {
	var h hinter
	switch {
	case errors.As(err, &h):
		return h.hint()
	case errors.Is(err, ErrReadOnly):
		return "give it a write permission bit (chmod u+w) to allow changes"
	case errors.Is(err, syscall.ENOSPC):
		return "the disk is full; the file was left unchanged"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return "the file and its directory must be writable; the file was left unchanged"
	}
	return ""
}

// Temp files are named ".<base>.hold-<host>-<pid>-<start>-<random>.tmp":
// hidden, recognizably ours, tied to the target's name, and naming the
// process that made them (host hash, pid, process start time) so that
// CleanStale can tell an abandoned one from one still being written.
const (
	tempMark   = ".hold-"
	tempSuffix = ".tmp"
)

// StaleAge is how old a temp file of an unknown creator (another host, or
// a platform that cannot tell whether a pid runs) must be before
// CleanStale removes it.
const StaleAge = 24 * time.Hour

func tempPrefix(target string) string {
	return "." + filepath.Base(target) + tempMark
}

// hostTag is a short hash of the host name (FNV-1a, 32 bits): enough to
// tell hosts apart in a file name without putting the name itself there.
// (A temp file named by a hold whose tag differs, an older one included,
// is judged as another host's: removed by age, never by pid.)
func hostTag(host string) string {
	h := fnv.New32a()
	h.Write([]byte(host))
	return hex.EncodeToString(h.Sum(nil))
}

func createTemp(fsys FS, target string, perm fs.FileMode) (File, error) {
	self := proc.Self()
	prefix := filepath.Join(filepath.Dir(target), tempPrefix(target)) +
		hostTag(self.Host) + "-" + strconv.Itoa(self.PID) + "-" + strconv.FormatUint(self.ProcStart, 10) + "-"
	for range 100 {
		f, err := fsys.OpenFile(prefix+randname.Hex(6)+tempSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: prefix, Err: fs.ErrExist}
}

// tempCreator parses a temp file name of target made by createTemp.
func tempCreator(target, name string) (host string, pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, tempPrefix(target))
	if !ok {
		return "", 0, 0, false
	}
	rest, ok = strings.CutSuffix(rest, tempSuffix)
	if !ok {
		return "", 0, 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 4 || len(parts[0]) != 8 || len(parts[3]) != 12 {
		return "", 0, 0, false
	}
	pid, err1 := strconv.Atoi(parts[1])
	start, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return "", 0, 0, false
	}
	return parts[0], pid, start, true
}

// CleanStale removes temp files of target left by writers that died
// mid-replace (SIGKILL, power loss), and returns how many it removed. It
// touches only names in the exact pattern createTemp makes for this
// target, and of those only the ones whose creator is known to be gone (a
// pid on this host that is dead or reused), or, when that cannot be told,
// that are older than StaleAge. A temp file of a live process is never
// removed: it may belong to a writer that uses another lock path. Errors
// are ignored; cleanup is best effort and is retried by the next call.
func CleanStale(fsys FS, target string) int {
	dir := filepath.Dir(target)
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return 0
	}
	self := proc.Self()
	myHost := hostTag(self.Host)
	removed := 0
	for _, e := range entries {
		host, pid, start, ok := tempCreator(target, e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		liveness := lock.LivenessUnknown
		if host == myHost {
			liveness = proc.Alive(pid, start)
		}
		switch liveness {
		case lock.Alive:
			continue
		case lock.LivenessUnknown:
			fi, err := e.Info()
			if err != nil || time.Since(fi.ModTime()) < StaleAge {
				continue
			}
		}
		if fsys.Remove(filepath.Join(dir, e.Name())) == nil {
			removed++
		}
	}
	return removed
}
