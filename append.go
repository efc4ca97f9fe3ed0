package hold

import (
	"context"

	"github.com/hold-dev/hold/internal/atomicfile"
)

// Append adds data to the end of the file at path under its lock: one
// write with O_APPEND followed by an fsync, so concurrent appenders never
// interleave and a record that Append reported written is on disk.
//
// It takes the exclusive lock "<path>.lock", the same lock Update and
// `hold run path` take (LockFile and Named choose another; for a path
// whose name ends in ".lock", also the file's own kernel lock, as every
// holder of it takes). Shared, AllowEmpty, AllowSplit and
// AllowOwnerChange are refused with ErrInvalidOption: an append is
// exclusive and writes in place. A missing file is created (mode 0666
// less umask) unless MustExist is given. If the write comes up short or
// fails, or the fsync fails, the file is truncated back to its size
// before the write, so no torn record remains; the error names the
// cause. When path is a symbolic link, the file it points to grows. ctx
// bounds the wait for the lock.
//
// Writers that append to the file without taking the lock are not
// excluded, and a failed Append's truncation would also remove what such a
// writer added in the meantime.
//
// Errors are *Error with Op "append".
func Append(ctx context.Context, path string, data []byte, opts ...Option) error {
	return appendTo(ctx, atomicfile.OS{}, path, data, opts)
}

// appendTo is Append with the file system as a parameter, for tests.
func appendTo(ctx context.Context, fsys atomicfile.FS, path string, data []byte, opts []Option) error {
	c, err := configFor(inAppend, path, opts)
	if err != nil {
		return err
	}
	return c.guarded(ctx, "append", fsys, path, func(l *Lock) error {
		// Resolved again under the lock: the file may have changed meanwhile.
		if err := atomicfile.AppendTo(fsys, path, c.mustExist, data, l.Check); err != nil {
			return fileError("append", path, err)
		}
		return nil
	})
}
