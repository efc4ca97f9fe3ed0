package hold

import "strings"

// refuseNUL refuses a target or lock file with a NUL byte, which no path of
// any system can hold: the system call would fail with a bare "invalid
// argument", reported as an I/O error; this names it as the bad name it is.
func (c *config) refuseNUL(target string) error {
	for _, p := range []string{target, c.lockFile} {
		if strings.IndexByte(p, 0) >= 0 {
			return &Error{Op: "acquire", Path: strings.ReplaceAll(p, "\x00", `\0`), Err: ErrInvalidName,
				Hint: "a path cannot contain a NUL byte"}
		}
	}
	return nil
}
