// Package redact hides the passwords in URLs, for messages, status output
// and owner records, which other users may read.
package redact

import "strings"

// URL hides the password of a URL ("scheme://user:password@...")
// and any password parameter, for messages, status output and owner
// records. Anything else is returned as it is.
func URL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, " /") {
		return s
	}
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		if user, _, hasPW := strings.Cut(rest[:at], ":"); hasPW {
			rest = user + ":***" + rest[at:]
		}
	}
	if q := strings.Index(rest, "?"); q >= 0 {
		head, query := rest[:q+1], rest[q+1:]
		frag := ""
		if h := strings.Index(query, "#"); h >= 0 {
			query, frag = query[:h], query[h:]
		}
		params := strings.Split(query, "&")
		for i, kv := range params {
			if k, _, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, "password") {
				params[i] = k + "=***"
			}
		}
		rest = head + strings.Join(params, "&") + frag
	}
	return scheme + "://" + rest
}

// URLs is URL for every URL inside s, as in a command-line
// argument "--db=postgres://app:secret@db/x". A URL runs from its scheme
// to the next blank or the end of s.
func URLs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := i
		for j > 0 && isSchemeByte(s[j-1]) {
			j--
		}
		k := strings.IndexAny(s[i:], " \t\n")
		if k < 0 {
			k = len(s)
		} else {
			k += i
		}
		b.WriteString(s[:j])
		b.WriteString(URL(s[j:k]))
		s = s[k:]
	}
}

func isSchemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}
