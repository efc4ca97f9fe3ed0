package lock

import (
	"bytes"
	"encoding/json"
)

// MaxRecordSize bounds how much of an owner record a reader will look at.
// A record larger than this is treated as corrupt rather than read whole, so
// a hostile or broken lock file cannot make a reader allocate without limit.
const MaxRecordSize = 64 << 10

// DecodeOwner parses a record. It tolerates what real lock files contain: padding
// and blank space around the JSON, a record cut short (returns ok=false), an
// oversized one (ok=false) and records from other tools that carry only some
// of the fields. It never fails loudly: an unusable record is simply absent.
func DecodeOwner(b []byte) (o *Owner, ok bool) {
	if len(b) > MaxRecordSize {
		return nil, false
	}
	b = bytes.TrimSpace(bytes.TrimRight(b, "\x00"))
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	var rec Owner
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, false
	}
	return &rec, true
}
