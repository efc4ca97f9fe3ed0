package flock

import (
	"fmt"
	"io"
	"os"
)

func init() { roles["rawholder"] = rawHolderRole }

// rawHolderRole locks the file at path as flock(1) does, writing nothing
// into it, says "held", and lets go when its input ends.
func rawHolderRole(path string) int {
	f, _, err := openLockFile(path, openMode{})
	if err == nil {
		err = f.lock(false, false)
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	f.close()
	return 0
}
