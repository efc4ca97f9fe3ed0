//go:build !darwin

package dirlock

// renameExclusive has no one-step form here, or needs none: Linux's
// renameNoReplace (sys_linux.go) calls renameat2 itself, and the BSDs have
// no rename that refuses an existing name.
func renameExclusive(from, to string) (ok bool, err error) { return false, nil }
