package lock

import (
	"bytes"
	"math"
)

// DecodeFence returns the fencing token of a record, as DecodeOwner would
// find it, without parsing the whole record: every exclusive acquisition
// of the kernel lock reads the previous token, and a full decode was most
// of its CPU time. A record laid out as AppendEncode writes it, the fence
// first and `}` last, yields the fence with the middle unchecked: such a
// record comes from one pwrite, which only a machine crash can tear, and
// then either write's fence is safe to count on. Any other record, or one
// where the shortcut could disagree (a key that may fold to the fence's
// name, an escape), is decoded in full; ok=false means DecodeOwner fails
// on it.
func DecodeFence(b []byte) (fence uint64, ok bool) {
	if len(b) > MaxRecordSize {
		return 0, false
	}
	t := bytes.TrimSpace(bytes.TrimRight(b, "\x00"))
	if rest, found := bytes.CutPrefix(t, []byte(recordStart)); found {
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
	o, ok := DecodeOwner(bytes.Clone(b))
	if !ok {
		return 0, false
	}
	return o.Fence, true
}

// mayNameFence reports whether b could hold another key that
// encoding/json would match to the fence field: one containing "ence" (the end
// of nameFence) in any case, or written with a \u escape.
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
