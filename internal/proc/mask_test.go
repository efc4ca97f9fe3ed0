package proc

import (
	"slices"
	"strings"
	"testing"
)

func TestMaskSecrets(t *testing.T) {
	for _, c := range []struct {
		name     string
		in, want []string
	}{
		{"option=value", []string{"hold", "run", "T", "--", "cmd", "--password=hunter2"}, []string{"hold", "run", "T", "--", "cmd", "--password=***"}},
		{"option value", []string{"cmd", "--token", "abc", "-v"}, []string{"cmd", "--token", "***", "-v"}},
		{"option names", []string{"cmd", "--api-key", "k", "--db-pass=x", "-p", "8080"}, []string{"cmd", "--api-key", "***", "--db-pass=***", "-p", "8080"}},
		{"key", []string{"cmd", "--key=k1", "--key", "k2", "--license-key=k3", "--keyfile=/etc/k", "--sort-key=name"}, []string{"cmd", "--key=***", "--key", "***", "--license-key=***", "--keyfile=/etc/k", "--sort-key=***"}},
		{"token, secret", []string{"cmd", "--token=t", "--secret=s", "--client-secret", "s2", "--api_key=a"}, []string{"cmd", "--token=***", "--secret=***", "--client-secret", "***", "--api_key=***"}},
		{"assignments", []string{"env", "AWS_SECRET_ACCESS_KEY=s3cr3t", "GITHUB_TOKEN=t", "PATH=/bin", "make"}, []string{"env", "AWS_SECRET_ACCESS_KEY=***", "GITHUB_TOKEN=***", "PATH=/bin", "make"}},
		{"URL", []string{"psql", "postgres://app:hunter2@db:5432/x", "http://host/path", "--db=mysql://u:pw@h/d"}, []string{"psql", "postgres://app:***@db:5432/x", "http://host/path", "--db=mysql://u:***@h/d"}},
		{"curl -u", []string{"curl", "-u", "user:pw", "https://x"}, []string{"curl", "-u", "user:***", "https://x"}},
		{"curl -u attached", []string{"curl", "-uuser:pw", "--user=u2:pw2", "--user", "u3:pw3", "-U", "proxy:pw4", "--proxy-user", "p:pw5"}, []string{"curl", "-uuser:***", "--user=u2:***", "--user", "u3:***", "-U", "proxy:***", "--proxy-user", "p:***"}},
		{"-u without password", []string{"sudo", "-u", "root", "ps", "-u", "alice"}, []string{"sudo", "-u", "root", "ps", "-u", "alice"}},
		{"bearer", []string{"curl", "-H", "Authorization: Bearer eyJhbGci", "https://api"}, []string{"curl", "-H", "Authorization: Bearer ***", "https://api"}},
		{"basic", []string{"curl", "--header", "authorization: Basic dXNlcjpwdw==", "-H", "Proxy-Authorization: Basic eDp5"}, []string{"curl", "--header", "authorization: Basic ***", "-H", "Proxy-Authorization: Basic ***"}},
		{"header forms", []string{"curl", "--header=Authorization: Bearer x", "-HAuthorization: Bearer y", "-H", "Cookie: sid=1", "-H", "X-Api-Key: k", "-H", "Accept: text/html"}, []string{"curl", "--header=Authorization: Bearer ***", "-HAuthorization: Bearer ***", "-H", "Cookie: ***", "-H", "X-Api-Key: ***", "-H", "Accept: text/html"}},
		{"mysql -p", []string{"mysql", "-h", "db", "-ps3cret", "app"}, []string{"mysql", "-h", "db", "-p***", "app"}},
		{"mysql -p prompts", []string{"/usr/bin/mysqldump", "-p", "app"}, []string{"/usr/bin/mysqldump", "-p", "app"}},
		{"-p elsewhere", []string{"ssh", "-p2222", "host"}, []string{"ssh", "-p2222", "host"}},
		{"sshpass", []string{"sshpass", "-p", "pw", "ssh", "host"}, []string{"sshpass", "-p", "***", "ssh", "host"}},
		{"sshpass attached", []string{"sshpass", "-ppw", "ssh", "host"}, []string{"sshpass", "-p***", "ssh", "host"}},
		{"shell string", []string{"hold", "run", "T", "-c", `curl -u bob:pw -H 'Authorization: Bearer tok' https://a:b@h/ && mysql -pxyz db`},
			[]string{"hold", "run", "T", "-c", `curl -u bob:*** -H 'Authorization: Bearer ***' https://a:***@h/ && mysql -p*** db`}},
		{"shell string kept", []string{"sh", "-c", `echo "a b" | grep -c 'x y'`}, []string{"sh", "-c", `echo "a b" | grep -c 'x y'`}},
		{"shell assignment", []string{"sh", "-c", "DB_PASSWORD=hunter2 ./migrate --token=abc"}, []string{"sh", "-c", "DB_PASSWORD=*** ./migrate --token=***"}},
		{"nested shell", []string{"sh", "-c", `sh -c "sshpass -p pw ssh h"`}, []string{"sh", "-c", `sh -c 'sshpass -p *** ssh h'`}},
		{"option value missing", []string{"tool", "--auth-token"}, []string{"tool", "--auth-token"}},
		{"option then option", []string{"tool", "--secret", "--verbose"}, []string{"tool", "--secret", "--verbose"}},
		{"not an assignment", []string{"sh", "-c", "x=1"}, []string{"sh", "-c", "x=1"}},
		// Issue 59: the ";" after a masked word was swallowed with it.
		{"operator after a secret", []string{"sh", "-c", "echo token=$T; hold status"}, []string{"sh", "-c", "echo token=***; hold status"}},
		{"operators kept", []string{"sh", "-c", "X_TOKEN=a |wc>o&&(API_KEY=b)"}, []string{"sh", "-c", "X_TOKEN=*** |wc>o&&(API_KEY=***)"}},
		{"an option's value is not the next command", []string{"sh", "-c", "tool --password;echo x"}, []string{"sh", "-c", "tool --password;echo x"}},
		{"quoted operator", []string{"sh", "-c", "echo 'token=a;b'"}, []string{"sh", "-c", "echo token=***"}},
	} {
		if got := MaskSecrets(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s: MaskSecrets(%q)\n = %q\nwant %q", c.name, c.in, got, c.want)
		}
	}
}

// TestMaskSecretsLeavesNoSecret: whatever the form, the secret text itself
// is gone from the masked command line.
func TestMaskSecretsLeavesNoSecret(t *testing.T) {
	const secret = "Zq8sekrit"
	for _, args := range [][]string{
		{"curl", "-u", "me:" + secret},
		{"curl", "-H", "Authorization: Bearer " + secret},
		{"curl", "-H", "Authorization: Basic " + secret},
		{"mysql", "-p" + secret},
		{"sshpass", "-p", secret, "ssh", "h"},
		{"tool", "--key=" + secret},
		{"git", "clone", "https://me:" + secret + "@example.org/r.git"},
		{"sh", "-c", "curl -u me:" + secret + " https://x"},
	} {
		if got := strings.Join(MaskSecrets(args), " "); strings.Contains(got, secret) {
			t.Errorf("MaskSecrets(%q) keeps the secret: %q", args, got)
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
