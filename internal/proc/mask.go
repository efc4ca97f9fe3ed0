package proc

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/hold-dev/hold/internal/redact"
)

// The owner record shows the holder's command line to everyone who can read
// the lock file, and on a shared filesystem to every machine that mounts
// it. A command line may carry secrets (`--password=…`, `API_TOKEN=…`), so
// the record gets a masked copy: the command as `ps` shows it, with every
// value that looks like a secret replaced by maskedValue. What looks like a
// secret:
//
//   - an option whose name contains a secret word (secretWords), or is
//     "key" or ends in it (`--key`, `--license-key`), in either form:
//     `--password=VALUE`, `-token=VALUE`, or `--password VALUE` (the next
//     argument is masked, unless it is itself an option);
//   - an assignment `NAME=VALUE` whose NAME contains a secret word, as
//     in `env AWS_SECRET_ACCESS_KEY=… cmd` or `make DB_PASSWORD=…`;
//   - the password of a URL, `scheme://user:PASSWORD@host` or
//     `?password=…` (redact.URLs);
//   - the password of a `user:PASSWORD` given to `-u`, `-U`, `--user` or
//     `--proxy-user` (curl, wget, httpie and many more): `-u user:***`;
//   - the value of an HTTP header whose name contains a secret word,
//     wherever it appears (`-H 'Authorization: Bearer …'`,
//     `--header=Cookie: …`, `X-Api-Key: …`); for Authorization the scheme
//     stays readable: `Authorization: Bearer ***`;
//   - after a MySQL or MariaDB client (mysql, mysqldump, mariadb, ...),
//     the attached password of `-pPASSWORD`; after sshpass, `-p PASSWORD`
//     and `-pPASSWORD`;
//   - all of the above inside an argument that is a shell command
//     (`sh -c '…'`, `hold run T -c '…'`): its words are masked the same
//     way.
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

// normName lowers a name and drops '-', '_' and '.', so that
// "--API_Key" and "apikey" compare equal.
func normName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '-' || r == '_' || r == '.':
			return -1
		case 'A' <= r && r <= 'Z':
			return r + ('a' - 'A')
		}
		return r
	}, name)
}

// isSecretName reports whether an option or variable name marks a secret.
func isSecretName(name string) bool {
	n := normName(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// isSecretOption reports whether an option's name marks its value as a
// secret: a secret word, or a key ("--key", "--license-key"; a
// "--keyfile" names a file, not a key).
func isSecretOption(name string) bool {
	return isSecretName(name) || strings.HasSuffix(normName(name), "key")
}

// userOptions take "user:password" (curl's -u and -U, wget's and many
// tools' --user).
var userOptions = map[string]bool{"-u": true, "-U": true, "--user": true, "--proxy-user": true}

// mysqlClients take their password attached to -p ("-pPASSWORD"; a bare
// "-p" asks for it, and the next argument is not a password).
var mysqlClients = map[string]bool{
	"mysql": true, "mysqldump": true, "mysqladmin": true, "mysqlimport": true,
	"mysqlcheck": true, "mysqlshow": true, "mysqlslap": true, "mysqlbinlog": true, "mysqlpump": true,
	"mariadb": true, "mariadb-dump": true, "mariadb-admin": true, "mariadb-import": true,
	"mariadb-check": true, "mariadb-show": true, "mariadb-slap": true, "mariadb-binlog": true,
}

// maxShellDepth bounds how deep shell commands inside shell commands are
// looked into.
const maxShellDepth = 3

// masker masks one command line, word by word; what a word means can
// depend on the words before it (an option that takes the next, the
// program whose options they are).
type masker struct {
	depth int
	// next masks the next word, if set (an option took it as its value).
	next func(string) string
	// attachedP: a program whose "-pVALUE" is a password was seen;
	// separateP: also "-p VALUE" (sshpass).
	attachedP, separateP bool
}

// MaskSecrets returns a copy of args with values that look like secrets
// replaced (see above).
func MaskSecrets(args []string) []string {
	out := make([]string, len(args))
	var m masker
	for i, a := range args {
		out[i] = m.word(a)
	}
	return out
}

func maskAll(string) string { return maskedValue }

// maskUserPass masks the password of "user:password".
func maskUserPass(v string) string {
	if user, _, ok := strings.Cut(v, ":"); ok {
		return user + ":" + maskedValue
	}
	return v
}

// word masks one word of a command line.
func (m *masker) word(a string) string {
	if f := m.next; f != nil {
		m.next = nil
		if !strings.HasPrefix(a, "-") {
			return f(a)
		}
	}
	if h, ok := maskHeader(a); ok {
		return h
	}
	spaced := strings.ContainsAny(a, " \t\n") && m.depth < maxShellDepth
	out := redact.URLs(a)
	if strings.HasPrefix(a, "-") && len(a) > 1 {
		// An option first: "--header=Authorization: Bearer …" is one
		// word with blanks, not a shell command.
		if o := m.option(a, out); o != out || m.next != nil || !spaced {
			return o
		}
	}
	if spaced {
		return m.shell(a)
	}
	if name, _, ok := strings.Cut(a, "="); ok && isVarName(name) && isSecretName(name) {
		return name + "=" + maskedValue
	}
	switch prog := filepath.Base(a); {
	case mysqlClients[prog]:
		m.attachedP, m.separateP = true, false
	case prog == "sshpass":
		m.attachedP, m.separateP = true, true
	}
	return out
}

// option masks an option a (out is a with its URLs redacted).
func (m *masker) option(a, out string) string {
	body := strings.TrimLeft(a, "-")
	name, val, hasVal := strings.Cut(body, "=")
	prefix := a[:len(a)-len(val)] // the option up to and with its '='
	switch {
	case isSecretOption(name):
		if hasVal {
			return prefix + maskedValue
		}
		m.next = maskAll
		return out
	case userOptions[a[:len(a)-len(body)]+name]:
		if hasVal {
			return prefix + maskUserPass(val)
		}
		m.next = maskUserPass
		return out
	case a == "-p" && m.separateP:
		m.next = maskAll
		return out
	}
	if a[1] != '-' && len(a) > 2 {
		// An attached value of a short option: -uUSER:PW, -HHeader: v,
		// -pPASSWORD.
		switch v := a[2:]; a[1] {
		case 'u', 'U':
			return a[:2] + maskUserPass(v)
		case 'H':
			if h, ok := maskHeader(v); ok {
				return a[:2] + h
			}
		case 'p':
			if m.attachedP {
				return "-p" + maskedValue
			}
		}
	}
	if hasVal {
		if h, ok := maskHeader(val); ok {
			return prefix + h
		}
	}
	return out
}

// maskHeader masks an HTTP header "Name: value" whose name contains a
// secret word (Authorization, Cookie, X-Api-Key, Private-Token, ...), and
// reports whether s was one. An Authorization header keeps its scheme
// ("Bearer ***"), which is no secret and says what kind of credential it
// was.
func maskHeader(s string) (string, bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || strings.HasPrefix(s[i+1:], "//") {
		return "", false
	}
	name := s[:i]
	for j := 0; j < len(name); j++ {
		c := name[j]
		if !(c == '-' || c == '_' || 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9') {
			return "", false
		}
	}
	if !isSecretName(name) {
		return "", false
	}
	v := s[i+1:]
	lead := len(v) - len(strings.TrimLeft(v, " \t"))
	kept := s[:i+1+lead]
	v = v[lead:]
	if strings.HasSuffix(normName(name), "authorization") {
		if scheme, _, ok := strings.Cut(v, " "); ok && scheme != "" {
			kept += scheme + " "
		}
	}
	return kept + maskedValue, true
}

// shell masks the words of s, a shell command given as one argument
// (sh -c '…'), in place: a word that needs no masking keeps its quoting,
// and one that does is replaced by its masked value, quoted if needed.
func (m *masker) shell(s string) string {
	sub := masker{depth: m.depth + 1}
	var b strings.Builder
	for i := 0; i < len(s); {
		if isBlank(s[i]) || isOperator(s[i]) {
			if s[i] == ';' || s[i] == '&' || s[i] == '|' || s[i] == '\n' {
				// A new command begins: an option of the last one
				// takes nothing of it.
				sub = masker{depth: m.depth + 1}
			}
			b.WriteByte(s[i])
			i++
			continue
		}
		start := i
		var val strings.Builder
		for i < len(s) && !isBlank(s[i]) && !isOperator(s[i]) {
			switch c := s[i]; c {
			case '\'', '"':
				j := strings.IndexByte(s[i+1:], c)
				if j < 0 {
					val.WriteString(s[i+1:])
					i = len(s)
					break
				}
				val.WriteString(s[i+1 : i+1+j])
				i += j + 2
			case '\\':
				if i+1 < len(s) {
					val.WriteByte(s[i+1])
				}
				i += 2
			default:
				val.WriteByte(c)
				i++
			}
		}
		raw := s[start:min(i, len(s))]
		v := val.String()
		if mv := sub.word(v); mv != v {
			b.WriteString(shellQuote(mv))
		} else {
			b.WriteString(raw)
		}
	}
	return b.String()
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// isOperator reports a character that ends a shell word unquoted (a
// control or redirection operator): "echo token=$T; hold status" is the
// words "echo" and "token=$T", then ";", whose masking must keep the ";".
func isOperator(c byte) bool { return strings.IndexByte(";&|()<>", c) >= 0 }

// shellQuote quotes s for a shell when it needs it.
func shellQuote(s string) string {
	// ("***" itself is left unquoted: this is for reading, not running.)
	if !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>()#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
