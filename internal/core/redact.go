package core

import "strings"

// RedactURL hides the password of a URL ("scheme://user:password@...")
// and any password parameter, for messages, status output and owner
// records. Anything else is returned as it is.
func RedactURL(s string) string {
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
