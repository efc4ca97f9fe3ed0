package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeBuild(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{nil, "(unknown version: built without module information)"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.4.2"},
			Settings: vcs()}, "v1.4.2, go1.26.0"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261130124207-de892e2c6827+dirty"},
			Settings: vcs("vcs.revision", "de892e2c6827aa", "vcs.time", "2026-11-30T12:42:07Z", "vcs.modified", "true")},
			"v0.0.0-20261130124207-de892e2c6827+dirty (revision de892e2c6827aa of 2026-11-30T12:42:07Z, modified), go1.26.0"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123abcd", "vcs.time", "2026-11-30T10:00:00Z", "vcs.modified", "true")},
			"(devel) (revision 0123abcd of 2026-11-30T10:00:00Z, modified), go1.26.0"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123abcd", "vcs.modified", "false")},
			"(devel) (revision 0123abcd), go1.26.0"},
	} {
		if got := describeBuild(c.bi); got != c.want {
			t.Errorf("describeBuild(%+v) = %q, want %q", c.bi, got, c.want)
		}
	}
	got := describeBuild(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}})
	if !strings.Contains(got, "no revision recorded") {
		t.Errorf("a devel build without VCS settings: %q, want it to say no revision was recorded", got)
	}
}

func TestDescribeRelease(t *testing.T) {
	for _, c := range []struct {
		v, commit, date, goVersion, want string
	}{
		{"1.2.3", "abcdef0123", "2026-11-30T12:00:00Z", "go1.26.0", "1.2.3 (commit abcdef0123, built 2026-11-30T12:00:00Z), go1.26.0"},
		{"1.2.3", "abcdef0123", "", "go1.26.0", "1.2.3 (commit abcdef0123), go1.26.0"},
		{"1.2.3", "", "", "", "1.2.3"},
	} {
		if got := describeRelease(c.v, c.commit, c.date, c.goVersion); got != c.want {
			t.Errorf("describeRelease(%q, %q, %q, %q) = %q, want %q", c.v, c.commit, c.date, c.goVersion, got, c.want)
		}
	}
}
