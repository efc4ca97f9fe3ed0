package cli

import (
	"fmt"
	"os"
	"runtime/debug"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print hold's version: the module version, or the revision it was built from",
		usage:   "version",
		help: `
A released hold (go install ...@vX.Y.Z) prints its module version. A build
from a source tree prints the VCS revision it was built from and whether the
tree had uncommitted changes ("modified"), when the Go toolchain recorded
them (it does unless built with -buildvcs=false). --version is the same.`,
		run: runVersion,
	})
}

func runVersion(args []string) int {
	fs := newFlagSet("version", true)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return fail("version", usagef("version takes no arguments"), exitConflict)
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(os.Stdout, "hold", describeBuild(bi))
	return 0
}

// describeBuild says what hold was built from: the module version of a
// release, else the VCS revision and whether the tree was modified, else
// that nothing is known. It also names the Go version, which decides the
// runtime's behaviour as much as hold's own code does.
func describeBuild(bi *debug.BuildInfo) string {
	if bi == nil {
		return "(unknown version: built without module information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	if v == "(devel)" {
		var rev, when string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		switch {
		case rev == "":
			v += " (no revision recorded: built outside a repository or with -buildvcs=false)"
		default:
			v = "revision " + rev
			if when != "" {
				v += " of " + when
			}
			if modified {
				v += ", modified"
			}
		}
	}
	return fmt.Sprintf("%s, %s", v, bi.GoVersion)
}
