package hold

// The options about where the lock is (see Option).

// LockFile uses exactly path as the lock path, instead of the one derived
// from the target ("<target>.lock"), and locks nothing else: a target
// whose name ends in ".lock" is then not locked itself.
//
// hold writes its owner record and token into a lock file only when the
// file is provably its own: empty, or holding a record of hold's, with one
// link. A file named here that holds anything else (the data file itself,
// as in flock(1)'s `flock data.json CMD`, or another tool's file) is
// locked without being written, as flock(1) locks it: the lock excludes
// every other holder, but the holder has no record and Token is 0
// (Lock.TokenError says why). To have the record and the token, lock a
// separate file.
func LockFile(path string) Option {
	return Option{kind: optLockFile, set: func(c *config) { c.lockFile = path; c.name = ""; c.named = false }}
}

// Named puts the lock in this user's private lock directory under name, for
// locks that guard something other than one file ("deploy", "nightly-db"):
// the file "<name>.lock" there, or "<name>" for a name that ends in ".lock"
// (so "deploy" and "deploy.lock" are one lock).
// A name is one component of at most 64 characters from a-z, 0-9, '.', '_'
// and '-', starting with a letter or digit; anything else fails with
// ErrInvalidName before the disk is touched. See NamedDir for where the
// directory is: the same for every process of the user, whatever its
// environment.
//
// While the lock is held (and while Acquire waits for it), the holder
// also keeps a shared flock(2) on that directory, so that
// systemd-tmpfiles, which skips a directory it cannot lock, never ages
// the lock file away. Earlier versions of hold kept named locks in
// $XDG_RUNTIME_DIR/hold or else in hold-UID in the temp directory, so
// that the same name from cron and from a login shell were two locks. A
// named lock also takes the lock of the same name at those places when a
// lock file is there (it waits for it, or TryAcquire reports it busy,
// naming the holder): an older hold still holding the name is never
// joined by a second holder. Inspect reports such a holder too.
func Named(name string) Option {
	return Option{kind: optNamed, set: func(c *config) { c.name = name; c.named = true; c.lockFile = "" }}
}

// ForRewrite says the holder will change target itself, as Update and
// Append do (and `hold update`, `hold append` and the agent's update and
// append, which pass it): target is then a data file.
//
// Its lock path is "<target>.lock", as for every holder, "x.lock.lock"
// for "x.lock". A target whose name ends in ".lock" ("x.lock", which
// flock(1) locks) is locked itself too, as every holder of it does; with
// ForRewrite that lock is in addition checked to still name the file (Check
// fails if someone else replaced it), and held until the change is
// published. (A kernel locker of hold that was granted the old inode after
// the rename finds it replaced and locks the new file instead; flock(1)
// and other tools do not check, so a flock(1) holder that opened x.lock
// before an update renamed it may hold the old inode while others use the
// new one: have such tools lock the companion, or only append to x.lock,
// which keeps its inode.) A missing x.lock is created empty for this,
// unless MustExist is given to Update or Append, and removed again when
// nothing was published. On Windows, which cannot rename over a file held
// open, Update of such a file is refused with ErrUnsupported (Append
// works); lock it apart there with LockFile.
//
// With LockFile or Named the lock is where they say and target is not
// locked itself.
func ForRewrite() Option {
	return Option{kind: optForRewrite, set: func(c *config) { c.rewrite = true }}
}
