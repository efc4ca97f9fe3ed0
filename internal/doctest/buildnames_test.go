package doctest

import (
	"go/build"
	"go/build/constraint"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// suffixRule is the build line a file-name suffix stands for
// (docs/development.md). A file named x_SUFFIX.go or x_SUFFIX_test.go
// must build on exactly the systems this expression selects.
var suffixRule = map[string]string{
	"unix":      "unix",
	"unixother": "unix && !linux",
	"notlinux":  "!linux",
	"notunix":   "!unix",
	"bsd":       "darwin || freebsd",
}

// unixOS are the systems that satisfy the "unix" build tag (as go/build
// decides it); allOS adds the rest of the systems Go knows.
var (
	unixOS = []string{"aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "linux", "netbsd", "openbsd", "solaris"}
	allOS  = append([]string{"js", "plan9", "wasip1", "windows", "zos"}, unixOS...)
)

// TestBuildSuffixes holds every Go file of the repository to the naming
// convention for build constraints: a suffix from suffixRule means that
// build line, and _other means the rest, the systems that none of the
// files sharing its stem builds on, and only when no suffixRule name says
// the same. The check is made on what go/build includes for each system,
// so it does not care how a build line is spelled.
func TestBuildSuffixes(t *testing.T) {
	root, err := filepath.Abs("../..") // the module's root (doctest_test.go's root is unix-only)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		stem, suffix, ok := splitSuffix(d.Name())
		if !ok {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.Dir(path)
		checked++
		if expr, ok := suffixRule[suffix]; ok {
			want := constraint.Expr(nil)
			if want, err = constraint.Parse("//go:build " + expr); err != nil {
				t.Fatal(err)
			}
			var wrong []string
			for _, goos := range allOS {
				if matches(t, goos, dir, d.Name()) != want.Eval(tags(goos)) {
					wrong = append(wrong, goos)
				}
			}
			if wrong != nil {
				t.Errorf("%s: a _%s file builds exactly where %q holds; this one is wrong on %v", rel, suffix, expr, wrong)
			}
			return nil
		}
		// _other: the rest of its stem's siblings.
		siblings, err := filepath.Glob(filepath.Join(dir, stem+"_*"))
		if err != nil {
			return err
		}
		isTest := strings.HasSuffix(d.Name(), "_test.go")
		siblings = slices.DeleteFunc(siblings, func(s string) bool {
			name := filepath.Base(s)
			rest := strings.TrimSuffix(strings.TrimPrefix(name, stem+"_"), ".go")
			return name == d.Name() || !strings.HasSuffix(name, ".go") ||
				strings.HasSuffix(name, "_test.go") != isTest ||
				strings.Contains(strings.TrimSuffix(rest, "_test"), "_")
		})
		var set []bool
		var wrong []string
		for _, goos := range allOS {
			others := false
			for _, s := range siblings {
				others = others || matches(t, goos, dir, filepath.Base(s))
			}
			got := matches(t, goos, dir, d.Name())
			if got == others {
				wrong = append(wrong, goos)
			}
			set = append(set, got)
		}
		if wrong != nil {
			t.Errorf("%s: an _other file builds exactly where none of %s_*.go does; this one is wrong on %v", rel, stem, wrong)
		}
		for name, expr := range suffixRule {
			want, _ := constraint.Parse("//go:build " + expr)
			same := true
			for i, goos := range allOS {
				same = same && set[i] == want.Eval(tags(goos))
			}
			if same {
				t.Errorf("%s builds where %q holds: name it %s_%s", rel, expr, stem, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no file with a build suffix found; is root right?")
	}
}

// splitSuffix splits a Go file's name into its stem and a build suffix
// that the convention names (a key of suffixRule, or "other"), if it has
// one: "sys_unixother_test.go" is "sys", "unixother".
func splitSuffix(name string) (stem, suffix string, ok bool) {
	base, found := strings.CutSuffix(name, ".go")
	if !found {
		return "", "", false
	}
	base = strings.TrimSuffix(base, "_test")
	i := strings.LastIndexByte(base, '_')
	if i < 0 {
		return "", "", false
	}
	stem, suffix = base[:i], base[i+1:]
	if _, named := suffixRule[suffix]; !named && suffix != "other" {
		return "", "", false
	}
	return stem, suffix, true
}

// matches reports whether go/build includes the file dir/name on goos.
func matches(t *testing.T, goos, dir, name string) bool {
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH = goos, "amd64"
	switch goos {
	case "js", "wasip1":
		ctx.GOARCH = "wasm"
	case "aix":
		ctx.GOARCH = "ppc64"
	case "zos":
		ctx.GOARCH = "s390x"
	}
	ok, err := ctx.MatchFile(dir, name)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Join(dir, name), err)
	}
	return ok
}

// tags is the build-tag test go/build applies on goos, as far as the
// expressions of suffixRule need it.
func tags(goos string) func(string) bool {
	return func(tag string) bool {
		switch {
		case tag == goos, tag == "unix" && slices.Contains(unixOS, goos):
			return true
		case goos == "android":
			return tag == "linux"
		case goos == "illumos":
			return tag == "solaris"
		case goos == "ios":
			return tag == "darwin"
		}
		return false
	}
}
