//go:build unix && !linux && !darwin

package dirlock

// renameNoReplace moves from to to unless to exists. The BSDs have no
// rename that refuses an existing name, so the check and the rename are two
// steps: a directory made at to between them (another tool's empty lock
// directory) is replaced. docs/portable.md says so.
func renameNoReplace(from, to string) error { return renameCheckThenMove(from, to) }
