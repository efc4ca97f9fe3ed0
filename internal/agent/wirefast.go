package agent

import (
	"encoding/json"
	"strconv"
	"sync"
)

// The lines of a lock's cycle without encoding/json. A client that takes
// one lock again and again sends the same acquire line but for its id,
// and a release that differs only in its numbers; the agent answers with
// a lock reply and an ok. Parsing and encoding those with reflection cost
// about half of the agent's own work per cycle (BenchmarkAgentSyncCycle),
// so the lines below are read and written by hand, and every other line
// still goes through encoding/json. Both paths give the same request and
// the same bytes (wirefast_test.go checks them against encoding/json).

// splitID splits a line that starts with a numeric id, {"id":N, as the
// clients write it, into N and what follows its comma; ok is false for
// any other line.
func splitID(line []byte) (id, rest []byte, ok bool) {
	const prefix = `{"id":`
	if len(line) < len(prefix) || string(line[:len(prefix)]) != prefix {
		return nil, nil, false
	}
	i, j := len(prefix), len(prefix)
	for j < len(line) && line[j] >= '0' && line[j] <= '9' {
		j++
	}
	// JSON numbers have no leading zeros; a long one is left to
	// encoding/json, which keeps it as it is.
	if j == i || j-i > 18 || line[i] == '0' && j-i > 1 || j >= len(line) || line[j] != ',' {
		return nil, nil, false
	}
	return line[i:j], line[j+1:], true
}

// parseUint reads the decimal digits at the start of b, without leading
// zeros, and returns the number and what follows it.
func parseUint(b []byte) (n uint64, rest []byte, ok bool) {
	j := 0
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == 0 || j > 18 || b[0] == '0' && j > 1 {
		return 0, nil, false
	}
	n, err := strconv.ParseUint(string(b[:j]), 10, 64)
	return n, b[j:], err == nil
}

// cutPrefix is bytes.CutPrefix with a string prefix.
func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return b, false
	}
	return b[len(prefix):], true
}

// parseLockOp parses what follows the id of a release, check or token
// request as the clients write it: "op":"release","lock":L, then
// optionally "queue":true and "sent":S, in that order, and nothing else.
func parseLockOp(rest []byte) (*request, bool) {
	rest, ok := cutPrefix(rest, `"op":"`)
	if !ok {
		return nil, false
	}
	var op string
	for _, o := range []string{"release", "check", "token"} {
		if r, ok := cutPrefix(rest, o+`","lock":`); ok {
			op, rest = o, r
			break
		}
	}
	if op == "" {
		return nil, false
	}
	req := &request{Op: op}
	if req.Lock, rest, ok = parseUint(rest); !ok {
		return nil, false
	}
	rest, req.Queue = cutPrefix(rest, `,"queue":true`)
	if r, ok := cutPrefix(rest, `,"sent":`); ok {
		var sent uint64
		if sent, rest, ok = parseUint(r); !ok {
			return nil, false
		}
		req.Sent = int64(sent)
	}
	if string(rest) != "}" {
		return nil, false
	}
	return req, true
}

// recentRequests keeps the requests parsed from recent acquire and try
// lines, by what follows their id, for lines that hold nothing but plain
// fields (no fields, settings or held_by): a copy of one is the request
// of another line that differs only in its id.
type recentRequests struct {
	mu sync.Mutex
	m  map[string]*request
}

// maxRecentRequests bounds recentRequests, which is emptied when full.
const maxRecentRequests = 64

var recent = recentRequests{m: make(map[string]*request)}

// lookup returns a copy of the request parsed from a line whose id is
// followed by rest, with its id set to id; nil if there is none.
func (c *recentRequests) lookup(id, rest []byte) *request {
	c.mu.Lock()
	t := c.m[string(rest)]
	c.mu.Unlock()
	if t == nil {
		return nil
	}
	req := *t
	req.ID = json.RawMessage(append([]byte(nil), id...))
	return &req
}

// remember keeps req, parsed from a line whose id is followed by rest, if
// another line that differs only in its id would give a copy of it.
func (c *recentRequests) remember(rest []byte, req *request) {
	if req.Op != "acquire" && req.Op != "try" || req.Fields != nil || req.Settings != nil ||
		req.HeldBy != nil || req.HeldInProc != nil || req.Ticket != nil || req.Data != nil || req.Request != nil {
		return
	}
	// The template is rest parsed alone: a line that named its id again
	// after the first would give another id, and is not kept.
	var t request
	if json.Unmarshal(append([]byte{'{'}, rest...), &t) != nil || t.ID != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxRecentRequests {
		clear(c.m)
	}
	c.m[string(rest)] = &t
}

// parseCommon parses a line of a lock's cycle by hand (see above); ok is
// false for any other line, which encoding/json parses.
func parseCommon(line []byte) (req *request, ok bool) {
	id, rest, ok := splitID(line)
	if !ok {
		return nil, false
	}
	if req, ok := parseLockOp(rest); ok {
		req.ID = json.RawMessage(append([]byte(nil), id...))
		return req, true
	}
	if req := recent.lookup(id, rest); req != nil {
		return req, true
	}
	return nil, false
}

// plainString reports whether s is written in JSON as itself between
// quotes by encoding/json: printable ASCII but for the characters it
// escapes.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendCommon appends r as encoding/json writes it, for the replies of a
// lock's cycle: a numeric id, ok, and nothing but the fields of a lock
// taken, a queued reply or the channel's first reply. It returns false,
// having appended nothing, for any other reply.
func appendCommon(b []byte, r *reply) ([]byte, bool) {
	// Every field not written below must be empty (wirefast_test.go
	// fails when reply gains a field this does not know of).
	if r.Event != "" || r.Version != 0 || r.Agent != "" || r.PID != 0 || r.Sync != nil || r.Owner != nil ||
		r.Update != 0 || r.Data != nil || r.Written || r.Warning != "" || r.Status != nil || r.Cancelled ||
		r.Error != nil || r.Recipe != nil || !plainString(r.Path) || !plainString(r.Protocol) {
		return b, false
	}
	if len(r.ID) == 0 || len(r.ID) > 18 || r.ID[0] == '0' && len(r.ID) > 1 {
		return b, false
	}
	for _, c := range r.ID {
		if c < '0' || c > '9' {
			return b, false
		}
	}
	b = append(b, `{"id":`...)
	b = append(b, r.ID...)
	b = append(b, `,"ok":`...)
	b = strconv.AppendBool(b, r.OK)
	if r.SpinMicros != nil {
		b = append(b, `,"spin_us":`...)
		b = strconv.AppendInt(b, int64(*r.SpinMicros), 10)
	}
	if r.Lock != 0 {
		b = append(b, `,"lock":`...)
		b = strconv.AppendUint(b, r.Lock, 10)
	}
	if r.Token != 0 {
		b = append(b, `,"token":`...)
		b = strconv.AppendUint(b, r.Token, 10)
	}
	if r.Path != "" {
		b = append(b, `,"path":"`...)
		b = append(b, r.Path...)
		b = append(b, '"')
	}
	if r.Protocol != "" {
		b = append(b, `,"protocol":"`...)
		b = append(b, r.Protocol...)
		b = append(b, '"')
	}
	if r.Slot != 0 {
		b = append(b, `,"slot":`...)
		b = strconv.AppendInt(b, int64(r.Slot), 10)
	}
	if r.ReleaseAhead {
		b = append(b, `,"release_ahead":true`...)
	}
	if r.Queued {
		b = append(b, `,"queued":true`...)
	}
	return append(b, '}'), true
}
