package redact

import "testing"

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db#x":                       "postgres://u:***@h:5432/db#x",
		"postgresql://u@h/db?sslmode=disable&password=pw#x": "postgresql://u@h/db?sslmode=disable&password=***#x",
		"etcd://a:b@h:2379/k":                               "etcd://a:***@h:2379/k",
		"postgres://u@h/db#name:with@signs":                 "postgres://u@h/db#name:with@signs",
		"locks/plain:path@x":                                "locks/plain:path@x",
		"postgres://h/db":                                   "postgres://h/db",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestURLs(t *testing.T) {
	for in, want := range map[string]string{
		"--db=postgres://app:secret@db:5432/x": "--db=postgres://app:***@db:5432/x",
		"a http://u:p@h/ and etcd://h:1/k":     "a http://u:***@h/ and etcd://h:1/k",
		"no url here":                          "no url here",
		"x://h/?password=p&y=1":                "x://h/?password=***&y=1",
	} {
		if got := URLs(in); got != want {
			t.Errorf("URLs(%q) = %q, want %q", in, got, want)
		}
	}
}
