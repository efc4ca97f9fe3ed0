package proc

import (
	"slices"
	"testing"
)

func TestMaskSecrets(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"hold", "run", "T", "--", "cmd", "--password=hunter2"}, []string{"hold", "run", "T", "--", "cmd", "--password=***"}},
		{[]string{"cmd", "--token", "abc", "-v"}, []string{"cmd", "--token", "***", "-v"}},
		{[]string{"cmd", "--api-key", "k", "--db-pass=x", "-p", "8080"}, []string{"cmd", "--api-key", "***", "--db-pass=***", "-p", "8080"}},
		{[]string{"env", "AWS_SECRET_ACCESS_KEY=s3cr3t", "GITHUB_TOKEN=t", "PATH=/bin", "make"}, []string{"env", "AWS_SECRET_ACCESS_KEY=***", "GITHUB_TOKEN=***", "PATH=/bin", "make"}},
		{[]string{"psql", "postgres://app:hunter2@db:5432/x", "http://host/path"}, []string{"psql", "postgres://app:***@db:5432/x", "http://host/path"}},
		{[]string{"curl", "-u", "user", "--header=Authorization: Bearer x"}, []string{"curl", "-u", "user", "--header=Authorization: Bearer x"}},
		{[]string{"tool", "--auth-token"}, []string{"tool", "--auth-token"}},
		{[]string{"tool", "--secret", "--verbose"}, []string{"tool", "--secret", "--verbose"}},
		{[]string{"sh", "-c", "x=1"}, []string{"sh", "-c", "x=1"}},
	} {
		if got := MaskSecrets(c.in); !slices.Equal(got, c.want) {
			t.Errorf("MaskSecrets(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRecordCommand(t *testing.T) {
	for v, want := range map[string]bool{"": true, "1": true, "0": false, "no": false, "FALSE": false} {
		t.Setenv("HOLD_RECORD_COMMAND", v)
		if got := RecordCommand(); got != want {
			t.Errorf("HOLD_RECORD_COMMAND=%q: RecordCommand() = %v, want %v", v, got, want)
		}
	}
}
