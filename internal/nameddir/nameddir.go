// Package nameddir says where named locks (hold.Named, `hold --name`) live
// on this machine, and where earlier versions of hold kept them.
//
// The rule is that one name means one lock for a user on a machine,
// whatever the environment of the process that takes it: cron, a login
// shell, ssh, a systemd service and `sudo -u` all find the same
// directory. So the directory is derived from the user id and fixed
// system paths only, never from an environment variable: earlier
// versions used $XDG_RUNTIME_DIR (set in a login session, unset under
// cron) or else $TMPDIR, and the same name from two environments was
// two locks.
//
// The one exception is TestEnv, which hold's own tests set so that their
// named locks stay out of the user's directory and apart from each
// other's; a process that does not carry the same value takes other locks.
package nameddir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
)

// TestEnv names the variable that moves the named-lock directory, for
// hold's own tests only (see the package comment). Where it is set,
// Earlier lists only the places that this process's environment names
// ($XDG_RUNTIME_DIR, $TMPDIR), which a test controls, and not the fixed
// ones, where the machine's real holders are.
const TestEnv = "HOLD_TEST_NAMED_DIR"

// Dir returns the named-lock directory of the current user, without
// creating or checking it.
func Dir() (string, error) {
	if d := os.Getenv(TestEnv); d != "" && filepath.IsAbs(d) {
		return d, nil
	}
	return System()
}

// System returns the named-lock directory that Dir returns where TestEnv
// is not set.
func System() (string, error) { return dir() }

// userDir is the name of the user's directory inside a shared parent.
func userDir() string { return "hold-" + strconv.Itoa(os.Getuid()) }

// Earlier returns where earlier versions of hold kept this user's named
// locks and might still hold one: $XDG_RUNTIME_DIR/hold (as this process
// sees it, and at the place logind puts it), and hold-UID in $TMPDIR and
// in /tmp. Dir itself is never among them. A holder there excludes a new
// holder of the same name only if the new one also locks there, which
// hold.Named does.
func Earlier() []string {
	dirs := earlier(os.Getenv(TestEnv) == "")
	cur, _ := Dir()
	seen := map[string]bool{cur: true}
	out := dirs[:0]
	for _, d := range dirs {
		if d == "" || !filepath.IsAbs(d) || seen[d] {
			continue
		}
		seen[d] = true
		out = append(out, d)
	}
	return out
}

// EarlierOwn returns the places of Earlier that can hold a named lock of
// this user's: those that exist and pass CheckPrivate. hold.Named waits
// for a holder there; `hold status --name` and `hold ls` report one. A
// place that another user made (or anyone may write) is skipped by all
// three alike: an earlier hold refused such a directory too, so no
// holder of this user's can be in it, and what is there (a lock with a
// record of anyone's choosing) is not this user's lock.
func EarlierOwn() []string {
	var out []string
	for _, d := range Earlier() {
		if CheckPrivate(d) == nil {
			out = append(out, d)
		}
	}
	return out
}

// ErrNotPrivate is what CheckPrivate's refusals match: a directory that
// is not this user's alone (not a directory, another user's, writable by
// others). The error's own message says which and what to do.
var ErrNotPrivate = errors.New("not a private directory of this user's")

// notPrivate is a refusal of CheckPrivate's, saying why in msg.
type notPrivate string

func (e notPrivate) Error() string { return string(e) }
func (e notPrivate) Unwrap() error { return ErrNotPrivate }
