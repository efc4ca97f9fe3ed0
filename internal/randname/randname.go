// Package randname makes the random parts of unique file names (temporary
// files, tombstones of removed locks).
package randname

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// Hex returns n random bytes in hex, for unique file names. They come
// from the runtime's generator, as lock.NewID's do: they name things and
// guard nothing, and crypto/rand would add the start of Go's FIPS module
// to every hold process.
func Hex(n int) string {
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rand.Uint64())
	}
	return hex.EncodeToString(b[:n])
}
