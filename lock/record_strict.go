package lock

import "math"

// IsRecord reports whether b is, exactly, an owner record as hold writes
// it: one JSON object whose first keys are the fence and the released
// flag, whose other keys are all Owner's, with values of its types,
// followed only by the blank padding a shorter record leaves when it
// overwrites a longer one. A past record (AppendPastRecord) is one too.
//
// It is the test of whether a file is hold's to write into (see
// IsOwnContent): anything else is the user's data or another tool's file.
// DecodeOwner is lenient on purpose, to read other tools' records; this is
// strict on purpose, because a false "yes" here lets hold overwrite data.
// It is hand-written, without encoding/json, because the kernel-lock
// protocol asks it on every acquisition, and a strict decode with
// encoding/json costs many times as much (docs/bench.md).
func IsRecord(b []byte) bool {
	if len(b) > MaxRecordSize {
		return false
	}
	s := scanner{b: b}
	if !s.lit(recordStart) || !s.uint(math.MaxUint64) || !s.lit(releasedKey) || !s.boolean() {
		return false
	}
	seen := uint16(1<<bitFence | 1<<bitReleased)
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
		case bitPID:
			ok = s.uint(math.MaxInt)
		case bitProcStart, bitFence, bitPIDNS:
			ok = s.uint(math.MaxUint64)
		case bitShared, bitReleased:
			ok = s.boolean()
		case bitHost, bitToken, bitStartedAt, bitProtocol, bitBootID:
			ok = s.str()
		case bitCommand:
			ok = s.strings()
		case bitFields:
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
	o, ok := DecodeOwner(b)
	return ok && o.PID > 0 && (o.ID != "" || !o.StartedAt.IsZero())
}

// IsPastRecord reports whether a record (one IsRecord accepts) says that
// its holder has let go: its released flag is true.
func IsPastRecord(b []byte) bool {
	s := scanner{b: b}
	return s.lit(recordStart) && s.uint(math.MaxUint64) && s.lit(releasedKey+"true")
}
