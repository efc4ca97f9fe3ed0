package proc

import (
	"os"
	"strings"

	"github.com/hold-dev/hold/internal/core"
)

// The owner record shows the holder's command line to everyone who can read
// the lock file, and on a shared filesystem to every machine that mounts
// it. A command line may carry secrets (`--password=…`, `API_TOKEN=…`), so
// the record gets a masked copy: the command as `ps` shows it, with every
// value that looks like a secret replaced by maskedValue. What looks like a
// secret:
//
//   - an option whose name contains a secret word (secretWords), in either
//     form: `--password=VALUE`, `-token=VALUE`, or `--password VALUE` (the
//     next argument is masked, unless it is itself an option);
//   - an assignment `NAME=VALUE` whose NAME contains a secret word, as
//     in `env AWS_SECRET_ACCESS_KEY=… cmd` or `make DB_PASSWORD=…`;
//   - the password of a URL, `scheme://user:PASSWORD@host` or
//     `?password=…` (core.RedactURLs).
//
// Masking is a safety net, not a guarantee: a secret passed as a bare
// argument cannot be told from any other word. HOLD_RECORD_COMMAND=0 (or
// the library's OmitCommand) leaves the command line out altogether.

// maskedValue replaces a secret.
const maskedValue = "***"

// secretWords are the parts of an option or variable name that mark its
// value as a secret, compared without case and with '-' and '_' removed.
var secretWords = []string{
	"password", "passwd", "passphrase", "pwd", "pass",
	"secret", "token", "apikey", "accesskey", "privatekey", "auth",
	"credential", "cookie", "session", "signature",
}

// isSecretName reports whether an option or variable name marks a secret.
func isSecretName(name string) bool {
	n := strings.Map(func(r rune) rune {
		switch {
		case r == '-' || r == '_' || r == '.':
			return -1
		case 'A' <= r && r <= 'Z':
			return r + ('a' - 'A')
		}
		return r
	}, name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// MaskSecrets returns a copy of args with values that look like secrets
// replaced (see above).
func MaskSecrets(args []string) []string {
	out := make([]string, len(args))
	maskNext := false
	for i, a := range args {
		switch {
		case maskNext && !strings.HasPrefix(a, "-"):
			out[i] = maskedValue
			maskNext = false
			continue
		default:
			maskNext = false
		}
		out[i] = core.RedactURLs(a)
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if isSecretName(name) {
				if hasValue {
					out[i] = a[:strings.IndexByte(a, '=')+1] + maskedValue
				} else {
					maskNext = true
				}
			}
			continue
		}
		if name, _, ok := strings.Cut(a, "="); ok && isVarName(name) && isSecretName(name) {
			out[i] = name + "=" + maskedValue
		}
	}
	return out
}

// isVarName reports whether s can be the name of an environment variable
// or make variable: letters, digits and '_', not starting with a digit.
func isVarName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// RecordCommand reports whether owner records should carry the command
// line: yes unless HOLD_RECORD_COMMAND is "0", "false" or "no".
func RecordCommand() bool {
	switch strings.ToLower(os.Getenv("HOLD_RECORD_COMMAND")) {
	case "0", "false", "no", "off":
		return false
	}
	return true
}
