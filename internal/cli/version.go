package cli

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print hold's version: the module version, or the revision it was built from",
		usage:   "version",
		help: `
A release build (an archive, a Linux package, the npm, Python or Homebrew
package) prints the release version, the commit it was built from and that
commit's time. hold installed with go install ...@vX.Y.Z prints its module
version. A build from a source tree prints the version the Go toolchain gave
it, the VCS revision it was built from and whether the tree had uncommitted
changes ("modified"), when the toolchain recorded them (it does unless built
with -buildvcs=false), and the Go version. --version is the same.`,
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
	fmt.Fprintln(os.Stdout, "hold", version())
	return 0
}

// The release build (.goreleaser.yaml) sets these with -ldflags -X: the
// release version without its "v", the full commit hash and the commit's
// time. A build by go build or go install leaves them empty, and the build
// information the toolchain records describes it instead.
var (
	releaseVersion string
	releaseCommit  string
	releaseDate    string
)

// version describes this build: the release's if the release build set
// it, else the toolchain's build information (see describeBuild).
func version() string {
	bi, _ := debug.ReadBuildInfo()
	if releaseVersion != "" {
		goVersion := ""
		if bi != nil {
			goVersion = bi.GoVersion
		}
		return describeRelease(releaseVersion, releaseCommit, releaseDate, goVersion)
	}
	return describeBuild(bi)
}

// describeRelease formats a release build's version: "1.2.3 (commit
// abcdef0, built 2026-11-30T12:00:00Z), go1.26.0", leaving out what the
// build did not set.
func describeRelease(v, commit, date, goVersion string) string {
	var details []string
	if commit != "" {
		details = append(details, "commit "+commit)
	}
	if date != "" {
		details = append(details, "built "+date)
	}
	if len(details) > 0 {
		v += " (" + strings.Join(details, ", ") + ")"
	}
	if goVersion != "" {
		v += ", " + goVersion
	}
	return v
}

// describeBuild says what hold was built from: the module version (a
// release's tag, or the pseudo-version the Go toolchain derives from the
// VCS for a build in a work tree), the VCS revision with its time and
// whether the tree had uncommitted changes, when they were recorded, and
// the Go version, which decides the runtime's behaviour as much as hold's
// own code does.
func describeBuild(bi *debug.BuildInfo) string {
	if bi == nil {
		return "(unknown version: built without module information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
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
	case rev != "":
		v += " (revision " + rev
		if when != "" {
			v += " of " + when
		}
		if modified {
			v += ", modified"
		}
		v += ")"
	case v == "(devel)":
		v += " (no revision recorded: built outside a repository or with -buildvcs=false)"
	}
	return v + ", " + bi.GoVersion
}
