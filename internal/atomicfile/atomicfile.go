// Package atomicfile replaces and appends to files so that a reader, or a
// crash, never sees a torn result: a replacement is written to a temp file
// in the same directory, synced, given the original's permission bits,
// renamed over the target and made durable by syncing the directory; an
// append that fails is cut back to the size before it.
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
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hold-dev/hold/internal/core"
	"github.com/hold-dev/hold/internal/proc"
)

// FS is the set of file system operations this package uses. OS is the
// real one; tests wrap it to fail chosen steps.
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	ReadFile(name string) ([]byte, error)
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir makes the entries of directory name durable (a no-op where
	// the platform cannot sync a directory).
	SyncDir(name string) error
	// Writable reports, without changing anything, an error when this
	// process may not write the existing file name.
	Writable(name string) error
}

// File is an open file as FS returns it. *os.File implements it.
type File interface {
	io.Writer
	Name() string
	Stat() (fs.FileInfo, error)
	Sync() error
	Truncate(size int64) error
	Chmod(mode fs.FileMode) error
	Close() error
}

// OS is the real file system.
type OS struct{}

// Lstat is os.Lstat.
func (OS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

// Readlink is os.Readlink.
func (OS) Readlink(name string) (string, error) { return os.Readlink(name) }

// ReadFile is os.ReadFile.
func (OS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// OpenFile is os.OpenFile.
func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return f, nil
}

// Rename is os.Rename.
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove is os.Remove.
func (OS) Remove(name string) error { return os.Remove(name) }

// ReadDir is os.ReadDir.
func (OS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// SyncDir syncs directory name; see syncDir in the platform files.
func (OS) SyncDir(name string) error { return syncDir(name) }

// Writable checks write permission on name; see writable in the platform
// files.
func (OS) Writable(name string) error { return writable(name) }

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
// the file, if it exists, is a regular file we may write.
func Resolve(fsys FS, path string) (*Target, error) { return resolve(fsys, path, true) }

// Locate is Resolve without asking the kernel whether this process may
// write the file: only its type and permission bits are checked, which
// the lstat that follows the links returns anyway. It serves callers for
// which that one system call is wasted: an append, whose open for writing
// asks the kernel the same question, and the check before a lock is
// taken, which is repeated in full under the lock.
func Locate(fsys FS, path string) (*Target, error) { return resolve(fsys, path, false) }

func resolve(fsys FS, path string, access bool) (*Target, error) {
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

// keptModeBits are the bits a replacement inherits from the original.
const keptModeBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// Replace makes t's content data: it writes data to a new temp file beside
// t, syncs it, gives it t's permission bits (and owner, where allowed),
// calls beforeRename, renames the temp file over t and syncs the
// directory. If any step up to the rename fails, or beforeRename returns an
// error, the temp file is removed and t is untouched. An error from the
// directory sync comes after the rename: the new content is in place but
// may not survive a crash.
func Replace(fsys FS, t *Target, data []byte, beforeRename func() error) (err error) {
	dir := filepath.Dir(t.Path)
	perm := fs.FileMode(0o666) // a new file: what umask allows, like any created file
	if t.Info != nil {
		perm = 0o600 // until the chmod below: no one else reads a half-written copy
	}
	f, err := createTemp(fsys, t.Path, perm)
	if err != nil {
		return err
	}
	tmp := f.Name()
	published := false
	defer func() {
		if !published {
			f.Close()
			fsys.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if t.Info != nil {
		keepOwner(f, t.Info) // before the chmod: chown clears setuid and setgid
		if err := f.Chmod(t.Info.Mode() & keptModeBits); err != nil {
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
	if err := fsys.Rename(tmp, t.Path); err != nil {
		return err
	}
	published = true
	return fsys.SyncDir(dir)
}

// Append writes data to the end of t with O_APPEND and syncs it. If the
// write or the sync fails, the file is truncated back to its size before
// the write, so no partial record stays behind, and synced again. A file
// that did not exist is created (permission 0666 less umask) and its
// directory synced.
func Append(fsys FS, t *Target, data []byte) error {
	f, err := fsys.OpenFile(t.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666)
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
	_, err = f.Write(data)
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

// Update is the read-modify-write of a file whose lock the caller holds.
// It resolves path (see Resolve), reads the file (a missing one reads as
// empty unless mustExist), and calls fn. An error from fn is returned as
// it is and nothing is written; so is nothing when fn returns the bytes it
// got. Otherwise Replace publishes the new content, with check as its
// beforeRename, and CleanStale then removes temp files that killed
// writers left.
func Update(fsys FS, path string, mustExist bool, fn func(old []byte) ([]byte, error), check func() error) error {
	t, err := Resolve(fsys, path)
	if err != nil {
		return err
	}
	old, err := fsys.ReadFile(t.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !mustExist:
		old, t.Info = nil, nil
	case err != nil:
		return err
	}
	data, err := fn(old)
	if err != nil {
		return err
	}
	if bytes.Equal(old, data) {
		return nil
	}
	if err := Replace(fsys, t, data, check); err != nil {
		return err
	}
	CleanStale(fsys, t.Path)
	return nil
}

// AppendTo is the append to a file whose lock the caller holds: it
// locates path (see Locate), refuses a missing file if mustExist, calls
// check (a lock that was lost must not write), and appends data with
// Append.
func AppendTo(fsys FS, path string, mustExist bool, data []byte, check func() error) error {
	t, err := Locate(fsys, path)
	if err != nil {
		return err
	}
	if t.Info == nil && mustExist {
		return &fs.PathError{Op: "open", Path: t.Path, Err: fs.ErrNotExist}
	}
	if len(data) == 0 {
		return nil
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	return Append(fsys, t, data)
}

// Hint says what to do about an error of this package, or "".
func Hint(err error) string {
	switch {
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

// hostTag is a short hash of the host name: enough to tell hosts apart in
// a file name without putting the name itself there.
func hostTag(host string) string {
	sum := sha256.Sum256([]byte(host))
	return hex.EncodeToString(sum[:4])
}

func createTemp(fsys FS, target string, perm fs.FileMode) (File, error) {
	self := proc.Self()
	prefix := filepath.Join(filepath.Dir(target), tempPrefix(target)) +
		hostTag(self.Host) + "-" + strconv.Itoa(self.PID) + "-" + strconv.FormatUint(self.ProcStart, 10) + "-"
	for range 100 {
		var r [6]byte
		rand.Read(r[:])
		f, err := fsys.OpenFile(prefix+hex.EncodeToString(r[:])+tempSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
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
		liveness := core.LivenessUnknown
		if host == myHost {
			liveness = proc.Alive(pid, start)
		}
		switch liveness {
		case core.Alive:
			continue
		case core.LivenessUnknown:
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
