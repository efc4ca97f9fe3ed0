package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hold-dev/hold/lock"
)

func sampleOwner() *lock.Owner {
	return &lock.Owner{
		PID:       4242,
		Host:      "a1",
		ID:        "0123456789abcdef0123456789abcdef",
		StartedAt: time.Date(2026, 11, 29, 15, 0, 0, 123456789, time.UTC),
		ProcStart: 987654,
		PIDNS:     4026531836,
		BootID:    "b5e95595-6113-4d5a-9272-9e0642b11b33",
		Command:   []string{"hold", "run", "data/pipeline.md", "--", "make", "say \"hi\"\n"},
		Fence:     17,
		Protocol:  "flock",
		Fields:    map[string]string{"job": "nightly", "b": "ü\x01\u2028"},
	}
}

// seedRecords are the seed corpus of the fuzz tests, which plain `go test`
// runs too: real records and the damage real lock files show.
func seedRecords() [][]byte {
	good := sampleOwner().Encode()
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
		bytes.Repeat([]byte("{"), lock.MaxRecordSize+1),
		append([]byte(`{"command":["`), append(bytes.Repeat([]byte("x"), lock.MaxRecordSize), `"]}`...)...),
	}
}

// FuzzDecode: Decode and DecodeFence never panic on any input, agree with
// each other, and a record Decode accepts encodes to a fixed point.
func FuzzDecode(f *testing.F) {
	for _, s := range seedRecords() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, ok := lock.DecodeOwner(b)
		fence, fok := DecodeFence(b)
		if ok != (o != nil) {
			t.Fatalf("Decode = %v, %v", o, ok)
		}
		if len(b) > lock.MaxRecordSize && (ok || fok) {
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
			if len(e1) > lock.MaxRecordSize {
				return // the fields added by encoding pushed it over the bound
			}
			o2, ok2 := lock.DecodeOwner(e1)
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

// FuzzEncode: the hand-written encoder says what encoding/json would say.
func FuzzEncode(f *testing.F) {
	f.Add(4242, "a1", "id", int64(1700000000123456789), uint64(5), "hold run -- make", uint64(17), false, "flock", "job", "nightly")
	f.Add(0, "", "", int64(0), uint64(0), "", uint64(0), true, "", "", "")
	f.Add(-1, "\xff", "\"\\", int64(-5), uint64(1<<63), "\x00\x1f\u2028\u2029\x7f<&>", uint64(1<<64-1), true, "dir", "\xc3", "\U0001F600")
	f.Fuzz(func(t *testing.T, pid int, host, id string, nanos int64, procStart uint64, cmd string, fence uint64, shared bool, proto, key, val string) {
		o := &lock.Owner{PID: pid, Host: host, ID: id, StartedAt: time.Unix(0, nanos).UTC(), ProcStart: procStart,
			Fence: fence, Shared: shared, Protocol: proto}
		if cmd != "" {
			o.Command = strings.Fields(cmd)
			o.Command = append(o.Command, cmd)
		}
		if key != "" || val != "" {
			o.Fields = map[string]string{key: val, "z" + key: val + "z"}
		}
		ours := o.Encode()
		if !bytes.HasSuffix(ours, []byte("}\n")) || bytes.Count(ours, []byte("\n")) != 1 {
			t.Fatalf("not one line: %q", ours)
		}
		std, err := json.Marshal(o)
		if err != nil {
			t.Skip("encoding/json refuses it too:", err)
		}
		var a, b lock.Owner
		if err := json.Unmarshal(ours, &a); err != nil {
			t.Fatalf("our encoding %q: %v", ours, err)
		}
		if err := json.Unmarshal(std, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("records differ:\nours %q\njson %q", ours, std)
		}
		if got, ok := DecodeFence(ours); !ok || got != fence {
			t.Fatalf("DecodeFence(%q) = %d, %v; want %d", ours, got, ok, fence)
		}
	})
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	o := sampleOwner()
	var a, b lock.Owner
	if err := json.Unmarshal(o.Encode(), &a); err != nil {
		t.Fatal(err)
	}
	std, _ := json.Marshal(o)
	if err := json.Unmarshal(std, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) || !a.StartedAt.Equal(o.StartedAt) {
		t.Fatalf("\n%+v\n%+v", a, b)
	}
	// career-ops' dir-lock reads pid, token and started_at by these names.
	var m map[string]any
	json.Unmarshal(o.Encode(), &m)
	for _, k := range []string{"pid", "token", "started_at", "fence", "host", "command"} {
		if _, ok := m[k]; !ok {
			t.Errorf("record lacks %q: %s", k, o.Encode())
		}
	}
	if !utf8.Valid(o.Encode()) {
		t.Error("record is not UTF-8")
	}
}

func TestDecodeTolerates(t *testing.T) {
	for _, s := range seedRecords() {
		o, ok := lock.DecodeOwner(s) // must not panic
		t.Logf("%.40q -> ok=%v", s, ok)
		_ = o
	}
	good := sampleOwner().Encode()
	if o, ok := lock.DecodeOwner(append(bytes.Clone(good[:len(good)-1]), "      \n\x00\x00"...)); !ok || o.Fence != 17 {
		t.Fatalf("a padded record does not decode: %v %v", o, ok)
	}
	if _, ok := lock.DecodeOwner(good[:len(good)-5]); ok {
		t.Fatal("a record cut short decoded")
	}
	if _, ok := lock.DecodeOwner(append(bytes.Repeat([]byte(" "), lock.MaxRecordSize), good...)); ok {
		t.Fatal("an oversized record decoded")
	}
	if f, ok := DecodeFence([]byte(`{"fence":1,"FENCE":3}`)); !ok || f != 3 {
		t.Fatalf("DecodeFence must agree with encoding/json on a folded duplicate key: %d %v", f, ok)
	}
}

func BenchmarkEncode(b *testing.B) {
	o := typicalOwner()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = o.AppendEncode(buf[:0])
	}
}

func BenchmarkEncodeJSON(b *testing.B) {
	o := typicalOwner()
	b.ReportAllocs()
	for b.Loop() {
		json.Marshal(o)
	}
}

// typicalOwner is a record as a holder writes it: nothing that needs
// escaping.
func typicalOwner() *lock.Owner {
	o := sampleOwner()
	o.Command = []string{"/usr/local/bin/hold", "run", "data/pipeline.md", "--", "make", "report"}
	o.Fields = map[string]string{"job": "nightly"}
	return o
}

func BenchmarkDecodeFence(b *testing.B) {
	rec := typicalOwner().Encode()
	if _, ok := DecodeFence(rec); !ok {
		b.Fatal("no fence")
	}
	b.ReportAllocs()
	for b.Loop() {
		DecodeFence(rec)
	}
}

func BenchmarkDecode(b *testing.B) {
	rec := typicalOwner().Encode()
	b.ReportAllocs()
	for b.Loop() {
		lock.DecodeOwner(rec)
	}
}

// A record's time is written in UTC whatever zone the time is in, so that
// writing one never loads the local zone's file, and it still names the
// same instant.
func TestEncodeWritesUTC(t *testing.T) {
	o := sampleOwner()
	o.StartedAt = time.Date(2026, 11, 29, 16, 0, 0, 5, time.FixedZone("CET", 3600))
	rec := o.Encode()
	if !bytes.Contains(rec, []byte(`"started_at":"2026-11-29T15:00:00.000000005Z"`)) {
		t.Fatalf("record's time not in UTC: %s", rec)
	}
	var back lock.Owner
	if err := json.Unmarshal(rec, &back); err != nil || !back.StartedAt.Equal(o.StartedAt) {
		t.Fatalf("decoded %v (%v), want the instant %v", back.StartedAt, err, o.StartedAt)
	}
}

func TestRandomHex(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range []int{1, 6, 8, 9, 16} {
		for range 100 {
			s := RandomHex(n)
			if len(s) != 2*n {
				t.Fatalf("RandomHex(%d) = %q: %d hex digits, want %d", n, s, len(s), 2*n)
			}
			if n >= 6 && seen[s] {
				t.Fatalf("RandomHex(%d) repeated %q", n, s)
			}
			seen[s] = true
		}
	}
}
