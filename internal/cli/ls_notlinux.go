//go:build !linux

package cli

import "io/fs"

// kernelTable is the kernel's lock table, which only Linux publishes
// (/proc/locks); elsewhere it is empty.
type kernelTable struct{}

// kernelUse is what the kernel's lock table says about one file: nothing
// outside Linux.
type kernelUse struct{ blocked int }

func (u kernelUse) locked() bool { return false }

func (*kernelTable) use(fs.FileInfo) kernelUse { return kernelUse{} }

// listHeldEverywhere needs the kernel's lock table.
func (l *lister) listHeldEverywhere() error {
	return usagef("--all needs the kernel's lock table, /proc/locks, which only Linux has")
}
