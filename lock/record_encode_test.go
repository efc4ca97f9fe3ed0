package lock

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func codecSample() *Owner {
	return &Owner{
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

// FuzzEncode: the hand-written encoder says what encoding/json would say.
func FuzzEncode(f *testing.F) {
	f.Add(4242, "a1", "id", int64(1700000000123456789), uint64(5), "hold run -- make", uint64(17), false, "flock", "job", "nightly")
	f.Add(0, "", "", int64(0), uint64(0), "", uint64(0), true, "", "", "")
	f.Add(-1, "\xff", "\"\\", int64(-5), uint64(1<<63), "\x00\x1f\u2028\u2029\x7f<&>", uint64(1<<64-1), true, "dir", "\xc3", "\U0001F600")
	f.Fuzz(func(t *testing.T, pid int, host, id string, nanos int64, procStart uint64, cmd string, fence uint64, shared bool, proto, key, val string) {
		o := &Owner{PID: pid, Host: host, ID: id, StartedAt: time.Unix(0, nanos).UTC(), ProcStart: procStart,
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
		var a, b Owner
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
	o := codecSample()
	var a, b Owner
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

func BenchmarkEncode(b *testing.B) {
	o := codecTypical()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = o.AppendEncode(buf[:0])
	}
}

func BenchmarkEncodeJSON(b *testing.B) {
	o := codecTypical()
	b.ReportAllocs()
	for b.Loop() {
		json.Marshal(o)
	}
}

// codecTypical is a record as a holder writes it: nothing that needs
// escaping.
func codecTypical() *Owner {
	o := codecSample()
	o.Command = []string{"/usr/local/bin/hold", "run", "data/pipeline.md", "--", "make", "report"}
	o.Fields = map[string]string{"job": "nightly"}
	return o
}

// A record's time is written in UTC whatever zone the time is in, so that
// writing one never loads the local zone's file, and it still names the
// same instant.
func TestEncodeWritesUTC(t *testing.T) {
	o := codecSample()
	o.StartedAt = time.Date(2026, 11, 29, 16, 0, 0, 5, time.FixedZone("CET", 3600))
	rec := o.Encode()
	if !bytes.Contains(rec, []byte(`"started_at":"2026-11-29T15:00:00.000000005Z"`)) {
		t.Fatalf("record's time not in UTC: %s", rec)
	}
	var back Owner
	if err := json.Unmarshal(rec, &back); err != nil || !back.StartedAt.Equal(o.StartedAt) {
		t.Fatalf("decoded %v (%v), want the instant %v", back.StartedAt, err, o.StartedAt)
	}
}

// TestEncodeBytes pins the bytes of a record and of a past record: other
// tools and earlier versions of hold read them, and DecodeFence, IsRecord
// and IsPastRecord count on the fence first and the released flag second.
func TestEncodeBytes(t *testing.T) {
	o := Owner{PID: 4242, Host: "vm", ID: "abc", StartedAt: time.Date(2026, 11, 30, 12, 0, 0, 5, time.UTC),
		ProcStart: 77, PIDNS: 4026531836, BootID: "b", Command: []string{"hold", "run", "x\ty"}, Fence: 12,
		Shared: true, Protocol: "flock", Fields: map[string]string{"z": "1", "a": "\u2028"}}
	want := `{"fence":12,"released":false,"pid":4242,"host":"vm","token":"abc","started_at":"2026-11-30T12:00:00.000000005Z",` +
		`"proc_start":77,"pid_ns":4026531836,"boot_id":"b","command":["hold","run","x\ty"],"shared":true,"protocol":"flock",` +
		`"fields":{"a":"\u2028","z":"1"}}` + "\n"
	if got := string(o.Encode()); got != want {
		t.Errorf("Encode:\n got %s\nwant %s", got, want)
	}
	if got, want := string((&Owner{}).Encode()), `{"fence":0,"released":false,"pid":0,"started_at":"0001-01-01T00:00:00Z"}`+"\n"; got != want {
		t.Errorf("Encode of an empty Owner:\n got %s\nwant %s", got, want)
	}
	if got, want := string(AppendPastRecord(nil, 12, 0)), `{"fence":12,"released":true}`+"\n"; got != want {
		t.Errorf("AppendPastRecord:\n got %s\nwant %s", got, want)
	}
}
