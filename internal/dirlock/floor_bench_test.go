//go:build unix

package dirlock

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkFloor measures, on the same filesystem and in the same run as
// BenchmarkUncontended, what the filesystem alone charges for a directory
// lock: a bare mkdir+rmdir (proper-lockfile's whole cycle, bar its mtime
// probe), and the protocol's own steps without any of its checks (mkdir,
// owner record created and written, rename aside, record unlinked, rmdir).
// The gap between the second and BenchmarkUncontended/dir is what the
// identity, token and read-back checks and the handle cost.
//
//	HOLD_BENCH_DIR=/dev/shm go test -run '^$' -bench 'Floor|Uncontended' ./internal/dirlock/
func BenchmarkFloor(b *testing.B) {
	record := make([]byte, 280) // about the size of a real owner record
	b.Run("mkdir+rmdir", func(b *testing.B) {
		path := filepath.Join(benchDir(b), "x.lock")
		for b.Loop() {
			if err := unix.Mkdir(path, 0o777); err != nil {
				b.Fatal(err)
			}
			if err := unix.Rmdir(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protocol-steps", func(b *testing.B) {
		dir := benchDir(b)
		path, tomb := filepath.Join(dir, "x.lock"), filepath.Join(dir, "x.lock.rm")
		for b.Loop() {
			if err := unix.Mkdir(path, 0o777); err != nil {
				b.Fatal(err)
			}
			fd, err := unix.Open(filepath.Join(path, OwnerFile), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			unix.Write(fd, record)
			unix.Close(fd)
			if err := unix.Rename(path, tomb); err != nil {
				b.Fatal(err)
			}
			if err := unix.Unlink(filepath.Join(tomb, OwnerFile)); err != nil {
				b.Fatal(err)
			}
			if err := unix.Rmdir(tomb); err != nil {
				b.Fatal(err)
			}
		}
	})
}
