// Package core holds what every lock protocol of hold shares: the owner
// record and its codec, the error type and its sentinels, and the interface a
// protocol implements. The public package hold re-exports these names; the
// protocols import them from here so that there is exactly one of each.
package core

import (
	"bytes"
	"encoding/json"
	"time"
)

// MaxRecordSize bounds how much of an owner record a reader will look at.
// A record larger than this is treated as corrupt rather than read whole, so
// a hostile or broken lock file cannot make a reader allocate without limit.
const MaxRecordSize = 64 << 10

// Owner is the record of who holds a lock. It is written by the holder after
// it has acquired the lock and read by waiters, by `hold status` and by the
// staleness rules of the portable protocol. Every field may be missing in a
// record written by another tool.
//
// The JSON names pid, token and started_at are the ones career-ops' dir-lock
// uses, so that the two can read each other's records.
type Owner struct {
	// PID is the holder's process id on Host.
	PID int `json:"pid"`
	// Host is the holder's host name.
	Host string `json:"host,omitempty"`
	// ID is a random identifier of this one acquisition. Release and reclaim
	// compare it, never the pid, to prove a lock is still the one they took.
	ID string `json:"token,omitempty"`
	// StartedAt is when the lock was acquired.
	StartedAt time.Time `json:"started_at"`
	// ProcStart identifies the holder process beyond its pid: the process
	// start time in the operating system's own units (on Linux, clock ticks
	// after boot). Zero when unknown. A live pid with a different start time
	// is a reused pid, so the original holder is gone.
	ProcStart uint64 `json:"proc_start,omitempty"`
	// Command is the holder's command line.
	Command []string `json:"command,omitempty"`
	// Fence is the fencing token of this acquisition (zero for shared holds).
	Fence uint64 `json:"fence,omitempty"`
	// Shared reports a shared (reader) hold.
	Shared bool `json:"shared,omitempty"`
	// Protocol names the protocol that wrote the record ("flock", "dir", "etcd").
	Protocol string `json:"protocol,omitempty"`
	// Fields are caller-supplied extra fields.
	Fields map[string]string `json:"fields,omitempty"`
}

// Held reports how long the holder has held the lock, as of now.
func (o *Owner) Held(now time.Time) time.Duration {
	if o == nil || o.StartedAt.IsZero() {
		return 0
	}
	d := now.Sub(o.StartedAt)
	if d < 0 {
		return 0
	}
	return d
}

// Encode returns the record as one line of JSON ending in a newline.
func (o *Owner) Encode() []byte {
	b, err := json.Marshal(o)
	if err != nil {
		// Owner holds only strings, integers, a bool, a time and a string map:
		// json.Marshal cannot fail on it.
		panic("hold: encoding owner record: " + err.Error())
	}
	return append(b, '\n')
}

// Decode parses a record. It tolerates what real lock files contain: padding
// and blank space around the JSON, a record cut short (returns ok=false), an
// oversized one (ok=false) and records from other tools that carry only some
// of the fields. It never fails loudly: an unusable record is simply absent.
func Decode(b []byte) (o *Owner, ok bool) {
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
