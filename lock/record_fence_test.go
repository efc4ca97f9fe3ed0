package lock

import (
	"bytes"
	"fmt"
	"testing"
)

// fenceFirst reports whether b is laid out as our encoder writes a record,
// `{"fence":N,...}`, with N == fence: the only shape whose fence
// DecodeFence may read without Decode agreeing that b is a record.
func fenceFirst(b []byte, fence uint64) bool {
	t := bytes.TrimSpace(bytes.TrimRight(b, "\x00"))
	prefix := fmt.Appendf(nil, `{"fence":%d`, fence)
	if !bytes.HasPrefix(t, prefix) || !bytes.HasSuffix(t, []byte("}")) {
		return false
	}
	next := t[len(prefix):]
	return len(next) > 0 && (next[0] == ',' || next[0] == '}')
}

func BenchmarkDecodeFence(b *testing.B) {
	rec := codecTypical().Encode()
	if _, ok := DecodeFence(rec); !ok {
		b.Fatal("no fence")
	}
	b.ReportAllocs()
	for b.Loop() {
		DecodeFence(rec)
	}
}
