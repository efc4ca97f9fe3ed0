//go:build unix

package flock

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/lock"
)

// lockFile is an open lock file. It works on the raw descriptor rather
// than an *os.File: os.NewFile costs two system calls (a fcntl and a
// refused epoll registration) and a finalizer on every acquisition, about
// a tenth of the whole cost. An *os.File is made only when a caller asks
// for one (File), and from then on every operation goes through it, so
// that a descriptor number closed through that *os.File can never be
// mistaken for a newer file that reused the number.
type lockFile struct {
	fd   int
	path string
	id   fileKey // the file's device and inode, from the open
	// links and uid are the file's link count and owner at the open:
	// they decide whether hold may write its record into it.
	links uint64
	uid   uint32
	// changed is the file's ctime and size at the open (see verified).
	changed fileStamp
	// dir: it is a directory, locked as flock(1) locks one, without a
	// record (nothing can be read or written in it).
	dir bool
	// created: this open made the file; see removeIfAlone.
	created bool
	// openGen is the verified cache's generation when the file was opened
	// (see fileCache.hasBefore).
	openGen uint64
	// known is the verified cache's answer for the last look (lookup),
	// forgotten at the next.
	known cacheAnswer

	mu sync.Mutex
	os *os.File // nil until file() is called
}

// sysfd returns the descriptor to operate on: the *os.File's once one
// exists (-1 after it was closed, so calls fail with EBADF).
func (f *lockFile) sysfd() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.os != nil {
		return int(f.os.Fd())
	}
	return f.fd
}

// file returns the lock file as an *os.File, made on first use. The
// descriptor is switched back to blocking mode first: it was opened with
// O_NONBLOCK only so that opening a FIFO could not hang, and a command
// that inherits it expects an ordinary file.
func (f *lockFile) file() *os.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.os == nil {
		unix.SetNonblock(f.fd, false)
		f.os = os.NewFile(uintptr(f.fd), f.path)
	}
	return f.os
}

func (f *lockFile) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.os != nil {
		return f.os.Close()
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}

// readAt reads at offset off, retrying interrupted calls.
func (f *lockFile) readAt(b []byte, off int64) (int, error) {
	fd := f.sysfd()
	n := 0
	for n < len(b) {
		m, err := unix.Pread(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// readOnce is one pread at offset off, retried only when interrupted
// before reading anything.
func (f *lockFile) readOnce(b []byte, off int64) (int, error) {
	fd := f.sysfd()
	for {
		n, err := unix.Pread(fd, b, off)
		if err != unix.EINTR {
			if n < 0 {
				n = 0
			}
			return n, err
		}
	}
}

func (f *lockFile) writeAt(b []byte, off int64) error {
	fd := f.sysfd()
	for len(b) > 0 {
		m, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[m:], off+int64(m)
	}
	return nil
}

func (f *lockFile) truncate(size int64) error { return unix.Ftruncate(f.sysfd(), size) }

// size returns the file's current size.
func (f *lockFile) size() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.sysfd(), &st); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// fileKey identifies a file: device and inode.
type fileKey struct{ dev, ino uint64 }

// namedBy reports whether path still names the file f is open on (whose
// identity was taken when it was opened: an open file's never changes). A
// missing path is "no"; an error means it cannot tell.
func (f *lockFile) namedBy(path string) (bool, error) {
	id, err := pathID(path)
	if err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, err
	}
	return id == f.id, nil
}

// isFile reports whether f is open on the file fi describes.
func (f *lockFile) isFile(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && f.id == fileKey{uint64(st.Dev), uint64(st.Ino)}
}

// replaced reports whether the file f is open on has lost its name since
// the open: renamed over (`hold update` of a file whose name ends in
// ".lock", which is locked itself too, or the command of `hold run x.lock`
// saving it) or removed. A lock taken on such a file guards nothing, since
// everyone else opens the file the path names now. It is asked with the
// lock held, after identify (or refresh, after a wait) looked at the
// locked file, and costs no system call of its own when that look proves
// the name kept: the file has one link, and it is unchanged since this
// process verified it before the open (verified.hasBefore), when it had
// one link too. The file's change time moves with every change of its
// links (a rename over the path takes the old file's only link), so the
// file kept its one name, the one the open found at path, from before the
// open until the lock was held; once the lock is held, a rename under it
// is a loss, which Check and the watch find. Any other file (its first
// acquisition in this process, one that changed, one with no link left or
// more than one, which may keep a name elsewhere) costs a look at the
// path, as one whose count is 0 does to confirm it (a filesystem that
// reports no link count must not send the acquisition round for ever).
// (Where change times are coarse, a link added and the path renamed over
// within one clock tick of the verification would leave the stamp equal;
// the count read before the lock missed a link added after it alike.)
func (f *lockFile) replaced(path string) bool {
	if f.links == 1 && verified.hasBefore(f) {
		return false
	}
	same, err := f.namedBy(path)
	return err == nil && !same
}

// fileInfo is what the open of a lock file learns about it.
type fileInfo struct {
	mode    uint32 // S_IFMT bits
	id      fileKey
	links   uint64
	uid     uint32
	changed fileStamp
}

// fileStamp is a file's change time (nanoseconds) and size: what moves
// whenever anyone writes to it.
type fileStamp struct{ ctime, size int64 }

// stamp returns the file's change time and size at the open.
func (f *lockFile) stamp() (fileStamp, bool) { return f.changed, f.changed.ctime != 0 }

// fstatType is fileType by fstat.
func fstatType(fd int) (fileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileInfo{}, err
	}
	return fileInfo{
		mode:    uint32(st.Mode) & unix.S_IFMT,
		id:      fileKey{uint64(st.Dev), uint64(st.Ino)},
		links:   uint64(st.Nlink),
		uid:     st.Uid,
		changed: fileStamp{st.Ctim.Nano(), st.Size},
	}, nil
}

// otherUsers reports whether the file belongs to another user while this
// process runs as root. Root may write anyone's file, but a lock file
// another user made is theirs: hold locks it without writing into it, as
// it does a file it may not write.
func (f *lockFile) otherUsers() bool {
	return f.uid != 0 && euid() == 0
}

// euid is the process's effective user id, asked once: a process that
// drops root later only makes otherUsers more careful than it need be.
var euid = sync.OnceValue(unix.Geteuid)

// links returns the file's link count at the open.
func (f *lockFile) linkCount() uint64 { return f.links }

// lstatID is pathID by lstat.
func lstatID(path string) (fileKey, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fileKey{}, err
	}
	return fileKey{uint64(st.Dev), uint64(st.Ino)}, nil
}

// procFd is the descriptor for proc.LockHolders.
func (f *lockFile) procFd() uintptr { return uintptr(f.sysfd()) }

// openMode says how openLockFile opens a lock file.
type openMode struct {
	// beforeCreate, if set, runs just before the file is created: an
	// existing file is opened first without O_CREAT.
	beforeCreate func() error
	// explicit: the caller named the lock path itself (lock.Request's
	// Explicit). A directory there is then locked, as flock(1) locks
	// one, unless it is a lock of the portable protocol.
	explicit bool
	// readOnly opens the file for reading only, as flock(1) does: for a
	// file hold will not write its record into, so that holding it does
	// not stop anyone from executing it ("text file busy").
	readOnly bool
	// perm is the permission bits of a file created (0666 when zero),
	// under the umask.
	perm uint32
}

// openLockFile opens (creating if needed) the lock file for locking.
//
// O_NOFOLLOW: the file receives our owner record, so following a symlink
// planted at the lock path would let its maker choose which file we write.
// O_NONBLOCK: opening a FIFO planted at the lock path must not hang; the
// file-type check (checkRegular) then rejects it. O_CLOEXEC: a command we start must not
// inherit the lock unless we pass it on purpose. O_NOCTTY: a terminal
// device named as the lock path must not become our controlling terminal.
//
// When the file exists but is not writable by us (another user's lock
// file, an immutable one, a read-only filesystem), it is opened read-only:
// flock(2) works on any descriptor, so the lock still works, only without
// our owner record. Another user's file, when we run as root, is opened
// read-only too (otherUsers: hold will not write into it). A directory at
// an explicit path is opened read-only, as flock(1) opens one.
func openLockFile(path string, m openMode) (f *lockFile, writable bool, err error) {
	const flags = unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY
	perm := m.perm
	if perm == 0 {
		perm = 0o666
	}
	access := unix.O_RDWR
	if m.readOnly {
		access = unix.O_RDONLY
	}
	// Asked before the open: an entry of the verified cache this
	// generation covers was verified before the file was opened.
	gen := verified.generation()
	// The file nearly always exists: open it without O_CREAT, which
	// costs nothing more, and only when it is missing create it, so that
	// created can say whether this open made it (see removeIfAlone), and
	// beforeCreate (when given) runs only then.
	fd, err := openRetry(path, access|flags, 0)
	created := false
	if err == unix.ENOENT {
		if m.beforeCreate != nil {
			if err := m.beforeCreate(); err != nil {
				return nil, false, err
			}
		}
		// Exclusively; a file that appeared meanwhile is opened.
		fd, err = openRetry(path, access|unix.O_CREAT|unix.O_EXCL|flags, perm)
		created = err == nil
		if err == unix.EEXIST {
			fd, err = openRetry(path, access|flags, 0)
		}
	}
	writable = !m.readOnly
	if err == unix.EACCES || err == unix.EPERM || err == unix.EROFS || err == unix.EISDIR && m.explicit {
		// (Linux refuses O_CREAT on a directory, whatever the access.)
		if rfd, rerr := openRetry(path, unix.O_RDONLY|flags, 0); rerr == nil {
			fd, err, writable = rfd, nil, false
		}
	}
	if err != nil {
		return nil, false, openError(path, err)
	}
	// What the file is (identify) is asked once it is locked, by the
	// acquisition (see Protocol.lockOpened).
	return &lockFile{fd: fd, path: path, created: created, openGen: gen}, writable, nil
}

// identify looks at the open lock file (one statx): it refuses anything
// but a regular file, or, at an explicit path, a directory that is not a
// portable lock, and notes the file's identity, link count, owner and
// change stamp. An acquisition asks once it has tried the lock, so that
// the same look also tells whether the file kept its name (replaced).
func (f *lockFile) identify(explicit bool) error {
	fi, err := checkRegular(f.sysfd(), f.path, explicit)
	if err != nil {
		return err
	}
	f.id, f.links, f.uid, f.changed, f.dir = fi.id, fi.links, fi.uid, fi.changed, fi.mode == unix.S_IFDIR
	f.known = cacheAnswer{}
	return nil
}

// refresh looks at the file again once a wait has been granted the lock,
// as identify looked before the wait: the link count and the change stamp
// are then those of the locked file, which replaced and judge decide on.
// When the look fails, the stamp is forgotten, so that neither trusts the
// cache of verified files (the path is asked, and the file read).
func (f *lockFile) refresh() {
	f.known = cacheAnswer{}
	fi, err := fileType(f.sysfd())
	if err != nil {
		f.changed = fileStamp{}
		return
	}
	f.links, f.uid, f.changed = fi.links, fi.uid, fi.changed
}

// openForInspect opens an existing lock file read-only, never creating it.
func openForInspect(path string) (*lockFile, error) {
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil, &os.PathError{Op: "open", Path: path, Err: os.ErrNotExist}
		}
		return nil, openError(path, err)
	}
	fi, err := checkRegular(fd, path, false)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &lockFile{fd: fd, path: path, id: fi.id, links: fi.links, uid: fi.uid, changed: fi.changed}, nil
}

// openRetry is open(2), retried when a signal interrupts it (possible on
// FUSE and network filesystems), and again a moment later while a lease on
// the file is being broken. Lock files are opened O_NONBLOCK, so an open
// that would wait for a lease's holder to let go (Linux's leases: the one
// Lock.Discard holds for a few system calls, see removeIfAlone, or a file
// server's) fails with EAGAIN instead: that is a wait, not an error. The
// kernel ends every lease within its lease-break time once an open has
// asked for it (45 s by default, /proc/sys/fs/lease-break-time), so the
// retries end; leaseWaitLimit bounds them should a holder take a new lease
// each time.
func openRetry(path string, flags int, perm uint32) (int, error) {
	pause, waited := leasePause, time.Duration(0)
	for {
		fd, err := openPath(path, flags, perm)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN && flags&unix.O_NONBLOCK != 0 && waited < leaseWaitLimit:
			time.Sleep(pause)
			waited += pause
			pause = min(2*pause, maxLeasePause)
			continue
		}
		return fd, err
	}
}

// The pauses of openRetry while a lease is broken: the first short, since
// hold's own lease lasts microseconds, then longer ones, up to a limit
// longer than the kernel's default lease-break time.
const (
	leasePause     = 100 * time.Microsecond
	maxLeasePause  = 20 * time.Millisecond
	leaseWaitLimit = time.Minute
)

// checkRegular refuses anything but a regular file, or, when dirOK, a
// directory that is not a lock of the portable protocol, and returns what
// the open learned of the file.
func checkRegular(fd int, path string, dirOK bool) (fileInfo, error) {
	fi, err := fileType(fd)
	if err != nil {
		return fi, &lock.Error{Op: "open", Path: path, Err: err}
	}
	switch {
	case fi.mode == unix.S_IFREG:
		return fi, nil
	case fi.mode == unix.S_IFDIR && dirOK:
		if isPortableLock(path) {
			return fi, portableDirError(path)
		}
		return fi, nil
	case fi.mode == unix.S_IFDIR:
		if isPortableLock(path) {
			// Not --lock-file: a kernel lock on it would not exclude
			// its holder either.
			return fi, portableDirError(path)
		}
		return fi, &lock.Error{Op: "open", Path: path, Err: lock.ErrNotRegular, Hint: dirHint}
	}
	return fi, &lock.Error{Op: "open", Path: path, Err: lock.ErrNotRegular,
		Hint: "it is a " + describeMode(fi.mode) + ", not a lock file; choose another lock path"}
}

func describeMode(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	case unix.S_IFLNK:
		return "symbolic link"
	}
	return "special file"
}

func openError(path string, err error) error {
	e := &lock.Error{Op: "open", Path: path, Err: err}
	switch err {
	case unix.ELOOP:
		e.Err = lock.ErrNotRegular
		e.Hint = "it is a symbolic link, which hold never follows for a lock file; choose another lock path, or name the file it points to"
	case unix.EISDIR:
		if isPortableLock(path) {
			// A portable holder has the path (perhaps it took over the
			// lock file this process was about to lock, see
			// LockExisting): say so, not that it is the wrong path.
			return portableDirError(path)
		}
		e.Err = lock.ErrNotRegular
		e.Hint = dirHint
	case unix.ENOENT:
		e.Hint = missingHint(path)
	case unix.ENOTDIR:
		e.Hint = "a component of the lock path is not a directory"
	case unix.ENXIO:
		e.Err = lock.ErrNotRegular
		e.Hint = "it is a socket or device, not a lock file; choose another lock path"
	case unix.EACCES, unix.EPERM:
		e.Hint = permissionHint(path)
	case unix.EROFS:
		e.Hint = "the filesystem is read-only; choose a lock path on a writable filesystem"
	case unix.EAGAIN:
		e.Hint = "another process holds a lease on the lock file (a file server, or a program that uses leases) and did not let go for a minute; try again later"
	case unix.ENOSPC, unix.EDQUOT:
		e.Hint = "the filesystem is full"
	}
	return e
}

// permissionHint explains EACCES from opening the lock file at path: a
// file that exists but whose own permissions keep this user out (a
// yarn.lock of mode 000: its companion could be made, the file itself not
// opened) is another failure than a directory that lets nobody create the
// file, and is fixed elsewhere.
func permissionHint(path string) string {
	var st unix.Stat_t
	if unix.Lstat(path, &st) == nil {
		return fmt.Sprintf("the file exists, but its permissions (%v, owner uid %d) do not let this user open it; change them (chmod), or choose another lock path with --lock-file or --name",
			os.FileMode(st.Mode&0o777), st.Uid)
	}
	return "no permission to create the lock file there; choose a writable place with --lock-file or --name"
}

// lock takes a flock(2) lock, shared or exclusive, blocking or not.
// EINTR is retried: a signal must not end a wait the caller did not end.
func (f *lockFile) lock(shared, block bool) error {
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	if !block {
		how |= unix.LOCK_NB
	}
	fd := f.sysfd()
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

func (f *lockFile) unlock() error {
	return unix.Flock(f.sysfd(), unix.LOCK_UN)
}

// release unlocks and closes. A descriptor never handed out as an
// *os.File (see file) is the only reference to its open file description:
// the lock was taken on a descriptor opened O_CLOEXEC and never
// duplicated, so closing it releases the lock, and the explicit unlock,
// one system call of every release, is left out. (A fork in progress
// elsewhere in the process holds a copy only until its exec, which closes
// it.) Once the file was handed out, a command may share the description,
// so the lock is dropped explicitly first.
func (f *lockFile) release() (unlockErr, closeErr error) {
	f.mu.Lock()
	shared := f.os != nil
	f.mu.Unlock()
	if shared {
		unlockErr = f.unlock()
	}
	return unlockErr, f.close()
}

func isBusy(err error) bool {
	return errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EAGAIN)
}

// lockError classifies a failed flock(2). Filesystems that do not do
// locks say so with ENOLCK (NFS without a lock manager), EOPNOTSUPP or
// EINVAL (some FUSE filesystems).
func lockError(path string, err error) error {
	e := &lock.Error{Op: "lock", Path: path, Err: err}
	switch err {
	case unix.ENOLCK, unix.EOPNOTSUPP, unix.EINVAL, unix.ENOSYS:
		e.Err = fmt.Errorf("%w: %w", lock.ErrUnsupported, err)
		e.Hint = "this filesystem refuses kernel locks; put the lock on a local filesystem with --lock-file or --name, or use the portable protocol (--protocol dir)"
	}
	return e
}

// key identifies the file for the verified cache.
func (f *lockFile) key() fileKey { return f.id }
