package agent

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/report"
)

// TestParseCommonIsJSON: a line parsed by hand (parseCommon) gives the
// request encoding/json gives, also for a line that differs only in its
// id from one seen before; every other line is left to encoding/json.
func TestParseCommonIsJSON(t *testing.T) {
	clear(recent.m)
	viaJSON := func(line string) *request {
		var req request
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return &req
	}
	same := func(line string) {
		t.Helper()
		got, bad := parseRequest([]byte(line))
		if bad != nil {
			t.Fatalf("%s: %s", line, bad.Error.Message)
		}
		if want := viaJSON(line); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nparsed    %+v\nencoding/json %+v", line, got, want)
		}
	}
	byHand := func(line string) {
		t.Helper()
		if _, ok := parseCommon([]byte(line)); !ok {
			t.Errorf("%s: not parsed by hand", line)
		}
		same(line)
	}
	byJSON := func(line string) {
		t.Helper()
		if _, ok := parseCommon([]byte(line)); ok {
			t.Errorf("%s: parsed by hand", line)
		}
		same(line)
	}
	for _, line := range []string{
		`{"id":12,"op":"release","lock":3,"queue":true,"sent":1234567890123}`,
		`{"id":1,"op":"release","lock":3}`,
		`{"id":7,"op":"check","lock":44,"queue":true}`,
		`{"id":8,"op":"token","lock":9}`,
		`{"id":0,"op":"release","lock":0,"sent":0}`,
	} {
		byHand(line)
	}
	for _, line := range []string{
		`{"id":012,"op":"release","lock":3}`,                    // not JSON: encoding/json refuses it
		`{"id":1,"op":"release","lock":3,"id":2}`,               // a second id
		`{"id":1,"op":"release","lock":3,"sent":-5}`,            // a negative time
		`{"id":1,"op":"release","lock":03}`,                     // not JSON
		`{"id":1,"op":"release","lock":3} `,                     // trailing space
		`{"id":1,"op":"release","lock":3.5}`,                    // not a lock number
		`{"id":1,"op":"releasex","lock":3}`,                     // another op
		`{"id":1,"op":"release","lock":1234567890123456789012}`, // too large
		`{"id":"a","op":"release","lock":3}`,                    // a string id
		`{"id":1,"lock":3,"op":"release"}`,                      // another order
	} {
		if _, ok := parseCommon([]byte(line)); ok {
			t.Errorf("%s: parsed by hand", line)
		}
	}
	// An acquire line is parsed by encoding/json once, then by hand for
	// the next id; one that cannot be a copy never is.
	for _, rest := range []string{
		`"op":"acquire","target":"/tmp/x","queue":true,"lazy":true}`,
		`"op":"try","target":"a\"b","wait":0.25,"shared":true,"mode":420,"slots":3}`,
		`"op":"acquire","lock_file":"/tmp/x.lock","make_dirs":true,"wait":5}`,
	} {
		byJSON(`{"id":1,` + rest)
		byHand(`{"id":2,` + rest)
		byHand(`{"id":987654321,` + rest)
	}
	for _, rest := range []string{
		`"op":"acquire","target":"x","fields":{"a":"b"}}`,
		`"op":"acquire","target":"x","held_by":[1]}`,
		`"op":"acquire","target":"x","settings":{"ttl":"5"}}`,
		`"op":"acquire","target":"x","id":5}`,
		`"op":"update","target":"x"}`,
		`"op":"status","target":"x"}`,
	} {
		byJSON(`{"id":1,` + rest)
		byJSON(`{"id":2,` + rest)
	}
	// A copy is the caller's to change.
	line := `{"id":3,"op":"acquire","target":"/tmp/x","wait":1}`
	a, _ := parseRequest([]byte(line))
	a.Target, a.Wait = "changed", nil
	if b, _ := parseRequest([]byte(line)); b.Target != "/tmp/x" || b.Wait == nil || *b.Wait != 1 {
		t.Errorf("a change to one copy shows in the next: %+v", b)
	}
}

// TestAppendCommonIsJSON: a reply written by hand (appendCommon) is the
// line encoding/json writes; every other reply is left to encoding/json.
func TestAppendCommonIsJSON(t *testing.T) {
	spin := 50
	common := []*reply{
		{ID: json.RawMessage("1"), OK: true},
		{ID: json.RawMessage("123456"), OK: true, Queued: true},
		{ID: json.RawMessage("5"), OK: true, Lock: 7, Path: "/tmp/x.lock", Protocol: "flock", ReleaseAhead: true},
		{ID: json.RawMessage("6"), OK: true, Lock: 8, Token: 99, Path: "a b/c.lock", Protocol: "dir", Slot: 2},
		{ID: json.RawMessage("0"), OK: false},
		{ID: json.RawMessage("9"), OK: true, SpinMicros: &spin, Lock: 1},
	}
	other := []*reply{
		{ID: json.RawMessage(`"s"`), OK: true},
		{ID: json.RawMessage("-1"), OK: true},
		{ID: nil, OK: true},
		{Event: "lost", Lock: 3, Path: "x"},
		{ID: json.RawMessage("5"), OK: true, Lock: 7, Path: "a<b.lock"},
		{ID: json.RawMessage("5"), OK: true, Lock: 7, Path: "é.lock"},
		{ID: json.RawMessage("5"), OK: true, Lock: 7, Path: "a\"b"},
		{ID: json.RawMessage("5"), OK: true, Owner: &hold.Owner{PID: 4}},
		{ID: json.RawMessage("5"), OK: false, Error: &replyError{Code: codeBusy, Message: "busy"}},
		{ID: json.RawMessage("5"), OK: true, Status: &report.Status{}},
		{ID: json.RawMessage("5"), OK: true, Written: true},
		{ID: json.RawMessage("5"), OK: true, Data: []byte("x")},
		{ID: json.RawMessage("5"), OK: true, Lock: 7, Path: "x", Recipe: &flock.Recipe{Path: "x", Ticket: []byte("{}")}},
	}
	for _, r := range append(slices.Clone(common), other...) {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendCommon(nil, r)
		if ok != slices.Contains(common, r) {
			t.Errorf("%s: written by hand: %v", want, ok)
		}
		if ok && string(got) != string(want) {
			t.Errorf("written by hand %s, encoding/json %s", got, want)
		}
		if line := encodeReply(r); string(line) != string(want)+"\n" {
			t.Errorf("encodeReply %q, encoding/json %q", line, want)
		}
	}
}

// TestAppendCommonKnowsEveryField fails when reply gains a field: add it
// to appendCommon's list of fields that must be empty (or that it
// writes), then here.
func TestAppendCommonKnowsEveryField(t *testing.T) {
	known := "ID Event OK Version Agent PID Sync SpinMicros Lock Token Path Protocol Slot ReleaseAhead " +
		"Recipe Owner Update Data Written Warning Status Cancelled Queued Error"
	var fields []string
	for f := range reflect.TypeFor[reply]().Fields() {
		fields = append(fields, f.Name)
	}
	if got := strings.Join(fields, " "); got != known {
		t.Fatalf("reply's fields are\n%s\nappendCommon knows\n%s", got, known)
	}
}

// TestRecentRequestsKnowEveryField fails when request gains a field: a
// copy of a remembered request shares what its fields point to, so a
// field holding a map or a slice that the agent may change must keep the
// request out of recentRequests (remember); then add it here.
func TestRecentRequestsKnowEveryField(t *testing.T) {
	known := "ID Op Version Sync SyncDir Pipeline Target Wait Shared Fair Protocol LockFile Name Fields Settings " +
		"HeldBy MakeDirs Mode SoftFile Stale Heartbeat LostIfTouched Lazy Slots DeadlockAfter MustExist AllowSplit AllowOwnerChange AllowEmpty Data " +
		"InProc HeldInProc heldFile Ticket Started Fence Lock Sent Update Request Queue syncCaller"
	var fields []string
	for f := range reflect.TypeFor[request]().Fields() {
		fields = append(fields, f.Name)
	}
	if got := strings.Join(fields, " "); got != known {
		t.Fatalf("request's fields are\n%s\nrecentRequests knows\n%s", got, known)
	}
}
