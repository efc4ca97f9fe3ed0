package fsinfo

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// LocalLocksOf identifies the filesystem holding the open file f (a lock
// file) and returns, with it, why kernel locks taken there may not be seen
// by other machines, or "" when they are (see Filesystem.LocalLocks).
//
// It is meant to run on every acquisition of a kernel lock, so it costs one
// fstatfs(2) where the magic number answers the question (local disks, 9p
// and the host shares): fs then carries only Type. Where the answer rests
// on mount options or a FUSE daemon's name, it reads /proc/self/mountinfo
// once per filesystem and remembers the answer, keyed by the device number
// (one fstat(2)) and the magic number.
func LocalLocksOf(f *os.File) (fs Filesystem, reason string, err error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return Filesystem{}, "", err
	}
	var (
		st   unix.Statfs_t
		sb   unix.Stat_t
		serr error
	)
	magic := int64(-1)
	cerr := sc.Control(func(fd uintptr) {
		if serr = unix.Fstatfs(int(fd), &st); serr != nil {
			return
		}
		magic = magicOf(&st)
		if needsMountinfo(magic) {
			serr = unix.Fstat(int(fd), &sb)
		}
	})
	switch {
	case cerr != nil:
		return Filesystem{}, "", cerr
	case serr != nil:
		return Filesystem{}, "", &os.PathError{Op: "fstatfs", Path: f.Name(), Err: serr}
	}
	if !needsMountinfo(magic) {
		fs = Filesystem{Type: magicNames[magic]}
		fs.classify()
		return fs, fs.LocalLocks(), nil
	}
	key := mountKey{dev: sb.Dev, magic: magic}
	if e, ok := mounts.get(key); ok {
		return e.fs, e.reason, nil
	}
	fs = fromMountinfo(f.Name(), magic)
	reason = fs.LocalLocks()
	mounts.put(key, mountAnswer{fs: fs, reason: reason})
	return fs, reason, nil
}

// mountKey identifies a mounted filesystem for the cache. The magic number
// guards against a device number reused by a later mount of another type;
// a remount of the same device with other options within one process's
// life is not noticed (nor is it by the processes already holding locks).
type mountKey struct {
	dev   uint64
	magic int64
}

type mountAnswer struct {
	fs     Filesystem
	reason string
}

// maxCached bounds the cache; a process that locks on more filesystems
// than this starts over, which costs one mountinfo read each.
const maxCached = 64

// mountCache remembers LocalLocksAt's answers for filesystems that needed
// mountinfo.
type mountCache struct {
	mu sync.Mutex
	m  map[mountKey]mountAnswer
}

var mounts mountCache

func (c *mountCache) get(k mountKey) (mountAnswer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[k]
	return a, ok
}

func (c *mountCache) put(k mountKey, a mountAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = make(map[mountKey]mountAnswer)
	}
	c.m[k] = a
}
