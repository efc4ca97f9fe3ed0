//go:build !linux && !darwin && !freebsd && !windows

package doctor

import "errors"

// statFilesystem cannot identify filesystems on this platform; the
// verdict then rests on the probes alone and cannot be "safe".
func statFilesystem(dir string) (Filesystem, error) {
	return Filesystem{}, errors.New("identifying the filesystem is not implemented on this platform")
}
