package lock

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"time"
)

// Owner is the record of who holds a lock. It is written by the holder after
// it has acquired the lock and read by waiters, by `hold status` and by the
// staleness rules of the portable protocol. Every field may be missing in a
// record written by another tool.
//
// The JSON names pid, token and started_at are the ones career-ops' dir-lock
// uses, so that the two can read each other's records. Its codec is this
// package's (Encode, DecodeOwner, IsRecord, DecodeFence, AppendPastRecord):
// every reader and writer of hold's uses it, so the format has one home.
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
	// written its own yet). A holder of the kernel lock replaces its record
	// with a past record on release (AppendPastRecord): the fence and this
	// flag, nothing about who held it.
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
