package lock

import (
	"bytes"
	"testing"
)

func TestAppendPastRecord(t *testing.T) {
	b := AppendPastRecord(nil, 7, 100)
	if len(b) != 100 || b[len(b)-1] != '\n' {
		t.Fatalf("past record %q: length %d, want 100 ending in a newline", b, len(b))
	}
	o, ok := DecodeOwner(b)
	if !ok || o.Fence != 7 || !o.Released || o.PID != 0 || len(o.Command) != 0 {
		t.Fatalf("past record decodes to %+v, %v", o, ok)
	}
	if f, ok := DecodeFence(b); !ok || f != 7 {
		t.Fatalf("DecodeFence(past record) = %d, %v", f, ok)
	}
	// Cut at PastRecordLen (as a release does after the write), it is
	// the line alone, and still the same record.
	for _, fence := range []uint64{0, 7, 10, 99, 12345, 1<<64 - 1} {
		n := PastRecordLen(fence)
		line := AppendPastRecord(nil, fence, 0)
		if len(line) != n || !bytes.Equal(AppendPastRecord(nil, fence, 300)[:n], line) || !IsRecord(line) {
			t.Errorf("fence %d: PastRecordLen %d, record %q", fence, n, line)
		}
		if f, ok := DecodeFence(line); !ok || f != fence {
			t.Errorf("DecodeFence(%q) = %d, %v", line, f, ok)
		}
	}
}
