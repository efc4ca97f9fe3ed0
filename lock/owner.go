package lock

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
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
	// PIDNS identifies the pid namespace PID is a pid of (on Linux, the
	// inode number of /proc/self/ns/pid), and BootID the boot of the
	// machine (/proc/sys/kernel/random/boot_id). A holder in a container
	// that shares the host's name, or on another boot, has a pid that
	// means nothing here: it is judged like a holder on another host.
	// Empty when unknown, and in records of earlier versions and other
	// tools, which are judged by their pid as before.
	PIDNS  uint64 `json:"pid_ns,omitempty"`
	BootID string `json:"boot_id,omitempty"`
	// Command is the holder's command line.
	Command []string `json:"command,omitempty"`
	// Fence is the fencing token of this acquisition (zero for shared
	// holds; see hold.Lock.Token).
	Fence uint64 `json:"fence,omitempty"`
	// Shared reports a shared (reader) hold.
	Shared bool `json:"shared,omitempty"`
	// Released reports that the holder that wrote the record has let go,
	// so the record is a leftover and does not describe whoever holds the
	// lock now (a tool that writes no record, or a holder that has not
	// written its own yet). Kernel-lock holders set it on release by
	// rewriting "false" as "true " in place: one small write, no reencoding.
	Released bool `json:"released"`
	// Protocol names the protocol that wrote the record ("flock", "dir",
	// "etcd", "postgres").
	Protocol string `json:"protocol,omitempty"`
	// Fields are caller-supplied extra fields (hold.Field).
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
func (o *Owner) Encode() []byte { return o.AppendEncode(nil) }

// AppendEncode appends the record, as Encode returns it, to b. It writes
// the same JSON encoding/json would for Owner (the fuzz tests hold it to
// that), by hand, because a lock's every acquisition writes a record and
// reflection made that a tenth of its cost. The fence comes first, so that
// the internal fast reader of the fence can usually read it without parsing the rest, and the
// released flag second, at an offset its writer can compute.
func (o *Owner) AppendEncode(b []byte) []byte {
	b = append(b, `{"fence":`...)
	b = strconv.AppendUint(b, o.Fence, 10)
	b = append(b, `,"released":`...)
	b = strconv.AppendBool(b, o.Released)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(o.PID), 10)
	if o.Host != "" {
		b = append(b, `,"host":`...)
		b = appendString(b, o.Host)
	}
	if o.ID != "" {
		b = append(b, `,"token":`...)
		b = appendString(b, o.ID)
	}
	b = append(b, `,"started_at":"`...)
	// Always in UTC: readers take any offset, and formatting in the local
	// zone would make every acquisition read the zone file.
	b = o.StartedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if o.ProcStart != 0 {
		b = append(b, `,"proc_start":`...)
		b = strconv.AppendUint(b, o.ProcStart, 10)
	}
	if o.PIDNS != 0 {
		b = append(b, `,"pid_ns":`...)
		b = strconv.AppendUint(b, o.PIDNS, 10)
	}
	if o.BootID != "" {
		b = append(b, `,"boot_id":`...)
		b = appendString(b, o.BootID)
	}
	if len(o.Command) > 0 {
		b = append(b, `,"command":[`...)
		for i, a := range o.Command {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, a)
		}
		b = append(b, ']')
	}
	if o.Shared {
		b = append(b, `,"shared":true`...)
	}
	if o.Protocol != "" {
		b = append(b, `,"protocol":`...)
		b = appendString(b, o.Protocol)
	}
	if len(o.Fields) > 0 {
		b = append(b, `,"fields":{`...)
		keys := make([]string, 0, len(o.Fields))
		for k := range o.Fields {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, o.Fields[k])
		}
		b = append(b, '}')
	}
	return append(b, "}\n"...)
}

// appendString appends s as a JSON string the way encoding/json does:
// invalid UTF-8 becomes U+FFFD, control characters and U+2028/U+2029 are
// escaped. (encoding/json also escapes <, > and &; that is for HTML, and
// either form decodes the same.)
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

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

// NewID returns a random acquisition id for Owner.ID: 16 bytes, in hex. A
// protocol fills in Request.Owner.ID with it when the caller left it
// empty. The bytes come from the runtime's generator (ChaCha8, seeded from
// the system's entropy), unique across processes and machines: an id names
// an acquisition and guards nothing, and crypto/rand would add the start of
// Go's FIPS module to every hold process.
func NewID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return hex.EncodeToString(b[:])
}
