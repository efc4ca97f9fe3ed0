package core

import (
	"math"

	"github.com/hold-dev/hold/lock"
)

// IsRecord reports whether b is, exactly, an owner record as hold writes
// it: one JSON object whose first keys are "fence" and "released", whose
// other keys are all lock.Owner's, with values of its types, followed only
// by the blank padding a shorter record leaves when it overwrites a longer
// one. A past record ({"fence":N,"released":true}) is one too.
//
// It is the test of whether a file is hold's to write into (see
// IsOwnContent): anything else is the user's data or another tool's file.
// lock.DecodeOwner is lenient on purpose, to read other tools' records; this is
// strict on purpose, because a false "yes" here lets hold overwrite data.
// It is hand-written, without encoding/json, because the kernel-lock
// protocol asks it on every acquisition, and a strict decode with
// encoding/json costs many times as much (docs/bench.md).
func IsRecord(b []byte) bool {
	if len(b) > lock.MaxRecordSize {
		return false
	}
	s := scanner{b: b}
	if !s.lit(`{"fence":`) || !s.uint(math.MaxUint64) || !s.lit(`,"released":`) || !s.boolean() {
		return false
	}
	seen := uint16(1<<keyFence | 1<<keyReleased)
	for {
		s.blank()
		if s.lit("}") {
			break
		}
		if !s.lit(",") {
			return false
		}
		s.blank()
		k := s.key()
		if k < 0 || seen&(1<<k) != 0 {
			return false
		}
		seen |= 1 << k
		s.blank()
		if !s.lit(":") {
			return false
		}
		s.blank()
		ok := false
		switch k {
		case keyPID:
			ok = s.uint(math.MaxInt)
		case keyProcStart, keyFence, keyPIDNS:
			ok = s.uint(math.MaxUint64)
		case keyShared, keyReleased:
			ok = s.boolean()
		case keyHost, keyToken, keyStartedAt, keyProtocol, keyBootID:
			ok = s.str()
		case keyCommand:
			ok = s.strings()
		case keyFields:
			ok = s.fields()
		}
		if !ok {
			return false
		}
	}
	s.blank()
	return s.i == len(s.b)
}

// IsOwnContent reports whether the content of a lock file is hold's: empty
// (as hold, flock(1) and Python's filelock leave a lock file) or an owner
// record (IsRecord).
func IsOwnContent(b []byte) bool { return len(b) == 0 || IsRecord(b) }

// AppendPastRecord appends what a lock file keeps once its holder has let
// go: the last fencing token and the released flag, nothing about who held
// it (no command line, no fields): one line, which PastRecordLen measures.
// Where size is larger, blanks and a final newline pad it to size bytes,
// so that one write over a longer record covers it whole; cut at
// PastRecordLen, what is left is the line alone, and either form is a
// valid record, so a crash between the write and the cut leaves one.
func AppendPastRecord(b []byte, fence uint64, size int) []byte {
	start := len(b)
	b = append(b, `{"fence":`...)
	b = appendUint(b, fence)
	b = append(b, `,"released":true}`...)
	b = append(b, '\n')
	if len(b)-start >= size {
		return b
	}
	for len(b)-start < size-1 {
		b = append(b, ' ')
	}
	return append(b, '\n')
}

// PastRecordLen is the length of the past record of fence without padding.
func PastRecordLen(fence uint64) int {
	n := len(`{"fence":,"released":true}`) + 2 // the digits' first, the newline
	for ; fence >= 10; fence /= 10 {
		n++
	}
	return n
}

func appendUint(b []byte, v uint64) []byte {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// The keys of an owner record, as bit positions.
const (
	keyFence = iota
	keyReleased
	keyPID
	keyHost
	keyToken
	keyStartedAt
	keyProcStart
	keyCommand
	keyShared
	keyProtocol
	keyFields
	keyPIDNS
	keyBootID
)

var recordKeys = [...]string{
	keyFence:     "fence",
	keyReleased:  "released",
	keyPID:       "pid",
	keyHost:      "host",
	keyToken:     "token",
	keyStartedAt: "started_at",
	keyProcStart: "proc_start",
	keyCommand:   "command",
	keyShared:    "shared",
	keyProtocol:  "protocol",
	keyFields:    "fields",
	keyPIDNS:     "pid_ns",
	keyBootID:    "boot_id",
}

// scanner walks a record. Every method consumes what it accepts and
// reports whether it did.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) lit(l string) bool {
	if len(s.b)-s.i < len(l) || string(s.b[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

// blank skips JSON whitespace. (The first kernel-lock records marked a
// release as "true " in place, so a blank may follow any value.)
func (s *scanner) blank() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\n', '\t', '\r':
			s.i++
		default:
			return
		}
	}
}

// uint accepts a JSON number that is a non-negative integer without a
// leading zero that fits in max.
func (s *scanner) uint(max uint64) bool {
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if v > (max-d)/10 {
			return false
		}
		v = v*10 + d
		s.i++
	}
	n := s.i - start
	return n > 0 && (s.b[start] != '0' || n == 1)
}

func (s *scanner) boolean() bool { return s.lit("true") || s.lit("false") }

// str accepts a JSON string: no raw control characters, only JSON's
// escapes.
func (s *scanner) str() bool {
	if !s.lit(`"`) {
		return false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i >= len(s.b) {
				return false
			}
			e := s.b[s.i]
			s.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(s.b)-s.i < 4 {
					return false
				}
				for _, h := range s.b[s.i : s.i+4] {
					if !('0' <= h && h <= '9' || 'a' <= h|0x20 && h|0x20 <= 'f') {
						return false
					}
				}
				s.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// key accepts a string naming a record key and returns its bit, or -1.
func (s *scanner) key() int {
	start := s.i
	if !s.str() {
		return -1
	}
	name := string(s.b[start+1 : s.i-1])
	for k, n := range recordKeys {
		if n == name {
			return k
		}
	}
	return -1
}

// strings accepts an array of strings.
func (s *scanner) strings() bool { return s.seq("[", "]", s.str) }

// fields accepts an object of string values.
func (s *scanner) fields() bool {
	return s.seq("{", "}", func() bool {
		if !s.str() {
			return false
		}
		s.blank()
		if !s.lit(":") {
			return false
		}
		s.blank()
		return s.str()
	})
}

// seq accepts open, items separated by commas (none or more), and close.
func (s *scanner) seq(open, close string, item func() bool) bool {
	if !s.lit(open) {
		return false
	}
	s.blank()
	if s.lit(close) {
		return true
	}
	for {
		s.blank()
		if !item() {
			return false
		}
		s.blank()
		if s.lit(close) {
			return true
		}
		if !s.lit(",") {
			return false
		}
	}
}

// IsLockRecord reports whether b is a lock owner record hold recognises:
// one of its own (IsRecord), or one that names a process and an
// acquisition the way career-ops' dir-lock and hold's portable protocol
// write owner.json (a positive pid, and a token or a start time). It
// decides what the portable protocol may delete: a lock directory holding
// only such a record, or nothing.
func IsLockRecord(b []byte) bool {
	if IsRecord(b) {
		return true
	}
	o, ok := lock.DecodeOwner(b)
	return ok && o.PID > 0 && (o.ID != "" || !o.StartedAt.IsZero())
}

// IsPastRecord reports whether a record (one IsRecord accepts) says that
// its holder has let go: "released" is true.
func IsPastRecord(b []byte) bool {
	s := scanner{b: b}
	return s.lit(`{"fence":`) && s.uint(math.MaxUint64) && s.lit(`,"released":true`)
}
