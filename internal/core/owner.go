// Package core holds what hold's own protocols share beyond the public
// contract in package lock: the fast reader of a record's fencing token,
// the strict recognition of hold's own records, random names and URL
// redaction.
package core

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"

	"github.com/hold-dev/hold/lock"
)

// DecodeFence returns the fencing token of a record, as lock.DecodeOwner
// would find it, without parsing the whole record: every exclusive
// acquisition reads the previous token, and a full decode was most of its
// CPU time. A record laid out as lock.Owner.AppendEncode writes it,
// `{"fence":N,` first and `}` last, yields N with the middle unchecked:
// such a record comes from one pwrite, which only a machine crash can
// tear, and then either write's fence is safe to count on. Any other
// record, or one where the shortcut could disagree (a key that may fold
// to "fence", an escape), is decoded in full; ok=false means DecodeOwner
// fails on it.
func DecodeFence(b []byte) (fence uint64, ok bool) {
	if len(b) > lock.MaxRecordSize {
		return 0, false
	}
	t := bytes.TrimSpace(bytes.TrimRight(b, "\x00"))
	const prefix = `{"fence":`
	if rest, found := bytes.CutPrefix(t, []byte(prefix)); found {
		var v uint64
		i := 0
		for ; i < len(rest) && '0' <= rest[i] && rest[i] <= '9'; i++ {
			d := uint64(rest[i] - '0')
			if v > (math.MaxUint64-d)/10 {
				i = -1 // overflow: leave it to DecodeOwner
				break
			}
			v = v*10 + d
		}
		// (JSON allows no leading zero: "007" is left to DecodeOwner.)
		if i > 0 && i < len(rest) && (rest[i] == ',' || rest[i] == '}') &&
			(rest[0] != '0' || i == 1) && t[len(t)-1] == '}' && !mayNameFence(rest[i:]) {
			return v, true
		}
	}
	// DecodeOwner gets a copy: encoding/json keeps no reference to its input,
	// but the compiler cannot know that, and handing it b would move every
	// caller's stack buffer to the heap, this rare path or not.
	o, ok := lock.DecodeOwner(bytes.Clone(b))
	if !ok {
		return 0, false
	}
	return o.Fence, true
}

// mayNameFence reports whether b could hold another key that
// encoding/json would match to the fence field: one containing "ence" in
// any case, or written with a \u escape.
func mayNameFence(b []byte) bool {
	if bytes.Contains(b, []byte(`\u`)) {
		return true
	}
	// Look at each 'n' and each 'N' (few in a record) for "ence" around
	// it, with IndexByte, which is vectorised where IndexAny is not.
	for _, n := range []byte("nN") {
		for i := 0; ; i++ {
			j := bytes.IndexByte(b[i:], n)
			if j < 0 {
				break
			}
			i += j
			if i >= 1 && i+2 < len(b) && b[i-1]|0x20 == 'e' && b[i+1]|0x20 == 'c' && b[i+2]|0x20 == 'e' {
				return true
			}
		}
	}
	return false
}

// RandomHex returns n random bytes in hex, for unique file names. They
// come from the runtime's generator, as lock.NewID's do: they name things
// and guard nothing.
func RandomHex(n int) string {
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rand.Uint64())
	}
	return hex.EncodeToString(b[:n])
}
