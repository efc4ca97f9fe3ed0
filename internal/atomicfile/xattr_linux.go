package atomicfile

import (
	"bytes"
	"errors"

	"golang.org/x/sys/unix"
)

// errNoAttr is the error for an attribute that is not there.
const errNoAttr = unix.ENODATA

// listXattrs returns the extended attributes of fd that this process may
// read. A file system without them has none (ENOTSUP); an attribute
// removed between the list and the read is skipped.
func listXattrs(fd int) ([]Xattr, error) {
	names, err := xattrNames(fd)
	if err != nil {
		return nil, err
	}
	var out []Xattr
	for _, name := range names {
		v, err := xattrValue(fd, name)
		if errors.Is(err, errNoAttr) {
			continue
		}
		if err != nil {
			return nil, &xattrReadError{name: name, err: err}
		}
		out = append(out, Xattr{Name: name, Value: v})
	}
	return out, nil
}

// xattrReadError names the attribute that could not be read.
type xattrReadError struct {
	name string
	err  error
}

func (e *xattrReadError) Error() string { return "reading " + e.name + ": " + e.err.Error() }
func (e *xattrReadError) Unwrap() error { return e.err }

// xattrNames lists fd's attribute names, growing the buffer if the list
// grew between asking its size and reading it (ERANGE).
func xattrNames(fd int) ([]string, error) {
	for {
		n, err := unix.Flistxattr(fd, nil)
		if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil, nil
		}
		if err != nil || n == 0 {
			return nil, err
		}
		buf := make([]byte, n)
		n, err = unix.Flistxattr(fd, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, name := range bytes.Split(buf[:n], []byte{0}) {
			if len(name) > 0 {
				names = append(names, string(name))
			}
		}
		return names, nil
	}
}

func xattrValue(fd int, name string) ([]byte, error) {
	for {
		n, err := unix.Fgetxattr(fd, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, n)
		if n == 0 {
			return buf, nil
		}
		n, err = unix.Fgetxattr(fd, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

func setXattr(fd int, name string, value []byte) error {
	return unix.Fsetxattr(fd, name, value, 0)
}

func removeXattr(fd int, name string) error { return unix.Fremovexattr(fd, name) }
