package lock

import (
	"bytes"
	"strings"
	"testing"
)

// codecSeeds are the seed corpus of the fuzz tests, which plain `go test`
// runs too: real records and the damage real lock files show.
func codecSeeds() [][]byte {
	good := codecSample().Encode()
	var padded bytes.Buffer
	padded.Write(good[:len(good)-1])
	padded.WriteString(strings.Repeat(" ", 300) + "\n")
	return [][]byte{
		good,
		padded.Bytes(),
		good[:len(good)/2],
		append(bytes.Clone(good), make([]byte, 100)...),
		make([]byte, 64),
		[]byte(""),
		[]byte("   \n"),
		[]byte("{}"),
		[]byte(`{"pid":1}`),
		[]byte(`{"pid":"one"}`),
		[]byte(`{"fence":18446744073709551615}`),
		[]byte(`{"fence":18446744073709551616}`),
		[]byte(`{"fence":1,"fence":2}`),
		[]byte(`{"fence":1,"FENCE":3}`),
		[]byte(`{"fence":1,"f\u0065nce":4}`),
		[]byte(`{"fence":-1}`),
		[]byte(`{"fence":1.5}`),
		[]byte(`{"fence":01}`),
		[]byte(`{"fence":5,"command":["licence"]}`),
		[]byte(`[1,2,3]`),
		[]byte(`{"started_at":"yesterday"}`),
		[]byte("\xff\xfe{\"pid\":1}"),
		bytes.Repeat([]byte("{"), MaxRecordSize+1),
		append([]byte(`{"command":["`), append(bytes.Repeat([]byte("x"), MaxRecordSize), `"]}`...)...),
	}
}

// FuzzDecode: Decode and DecodeFence never panic on any input, agree with
// each other, and a record Decode accepts encodes to a fixed point.
func FuzzDecode(f *testing.F) {
	for _, s := range codecSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, ok := DecodeOwner(b)
		fence, fok := DecodeFence(b)
		if ok != (o != nil) {
			t.Fatalf("Decode = %v, %v", o, ok)
		}
		if len(b) > MaxRecordSize && (ok || fok) {
			t.Fatalf("a record of %d bytes was accepted", len(b))
		}
		if ok {
			if !fok || fence != o.Fence {
				t.Fatalf("DecodeFence = %d, %v; Decode found fence %d", fence, fok, o.Fence)
			}
			if o.StartedAt.Year() < 0 || o.StartedAt.Year() > 9999 {
				return // not a time any encoder can write back
			}
			e1 := o.Encode()
			if len(e1) > MaxRecordSize {
				return // the fields added by encoding pushed it over the bound
			}
			o2, ok2 := DecodeOwner(e1)
			if !ok2 {
				t.Fatalf("re-encoded record does not decode: %q", e1)
			}
			if e2 := o2.Encode(); !bytes.Equal(e1, e2) {
				t.Fatalf("encoding is not a fixed point:\n%q\n%q", e1, e2)
			}
		} else if fok && !fenceFirst(b, fence) {
			t.Fatalf("DecodeFence accepted %q, which Decode refuses and which does not start with our fence", b)
		}
	})
}

func TestDecodeTolerates(t *testing.T) {
	for _, s := range codecSeeds() {
		o, ok := DecodeOwner(s) // must not panic
		t.Logf("%.40q -> ok=%v", s, ok)
		_ = o
	}
	good := codecSample().Encode()
	if o, ok := DecodeOwner(append(bytes.Clone(good[:len(good)-1]), "      \n\x00\x00"...)); !ok || o.Fence != 17 {
		t.Fatalf("a padded record does not decode: %v %v", o, ok)
	}
	if _, ok := DecodeOwner(good[:len(good)-5]); ok {
		t.Fatal("a record cut short decoded")
	}
	if _, ok := DecodeOwner(append(bytes.Repeat([]byte(" "), MaxRecordSize), good...)); ok {
		t.Fatal("an oversized record decoded")
	}
	if f, ok := DecodeFence([]byte(`{"fence":1,"FENCE":3}`)); !ok || f != 3 {
		t.Fatalf("DecodeFence must agree with encoding/json on a folded duplicate key: %d %v", f, ok)
	}
}

func BenchmarkDecode(b *testing.B) {
	rec := codecTypical().Encode()
	b.ReportAllocs()
	for b.Loop() {
		DecodeOwner(rec)
	}
}
