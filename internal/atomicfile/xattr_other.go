//go:build !linux && !darwin && !freebsd && !netbsd

package atomicfile

import "errors"

// These systems have no extended attributes that x/sys/unix reaches in
// the same way (Windows keeps its ACLs in security descriptors, which a
// file created in the same directory inherits): there is nothing to copy.

func listXattrs(fd int) ([]Xattr, error) { return nil, nil }

func setXattr(fd int, name string, value []byte) error {
	return errors.ErrUnsupported
}

func removeXattr(fd int, name string) error { return errors.ErrUnsupported }
