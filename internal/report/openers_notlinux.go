//go:build !linux

package report

// openersOf: finding which processes have a file open needs /proc; other
// systems report none.
func openersOf(string) []Opener { return nil }
