//go:build !linux

package cli

// openersOf: finding which processes have a file open needs /proc; other
// systems report none.
func openersOf(string) []opener { return nil }
