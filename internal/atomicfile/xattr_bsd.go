//go:build darwin || freebsd || netbsd

package atomicfile

import "golang.org/x/sys/unix"

// errNoAttr is the error for an attribute that is not there.
const errNoAttr = unix.ENOATTR
