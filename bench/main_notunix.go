//go:build !unix

// Command bench is hold's benchmark suite. It compares kernel-lock
// implementations through flock(2) and flock(1), so it runs on unix only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: the benchmark suite runs on unix systems only")
	os.Exit(1)
}
