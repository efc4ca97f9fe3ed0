//go:build !linux

package atomicfile

import "errors"

// Extended attributes are copied on Linux only. Windows keeps ACLs in
// security descriptors, which a file created in the same directory
// inherits. macOS and the BSDs have extended attributes under other
// rules (on macOS some are the system's own, which no process may set, so
// copying them all would refuse updates), and there they are not kept:
// docs/update.md says so.

func listXattrs(fd int) ([]Xattr, error) { return nil, nil }

func setXattr(fd int, name string, value []byte) error {
	return errors.ErrUnsupported
}

func removeXattr(fd int, name string) error { return errors.ErrUnsupported }
