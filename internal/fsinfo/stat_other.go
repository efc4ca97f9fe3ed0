//go:build !linux && !darwin && !freebsd && !windows

package fsinfo

import "errors"

// Stat cannot identify filesystems on this platform; the
// verdict then rests on the probes alone and cannot be "safe".
func Stat(dir string) (Filesystem, error) {
	return Filesystem{}, errors.New("identifying the filesystem is not implemented on this platform")
}
