package flock

import (
	"time"

	"github.com/hold-dev/hold/lock"
)

// In-process acquisitions. A client of the agent (the Python package)
// pays two wake-ups and two interpreters' work for every lock it takes
// through the agent, where the lock itself is an open, a flock(2) and a
// stat. So, for the one case where nothing but the kernel decides whether
// the lock may be taken (an exclusive lock on a lock file that is hold's
// to write, empty or holding a past record), the agent hands the client a recipe,
// and the client takes the free lock in its own process:
//
//   - open Path with Flags (which never create it), flock(LOCK_EX|LOCK_NB);
//   - fstat the descriptor: a regular file with one link, whose device,
//     inode, change time and size are the recipe's. That is the look the
//     verified cache makes for the library's own acquisitions: the file
//     was judged hold's and free of live records when the recipe was
//     made, and anything written into it since, by anyone, moved its
//     change time, as does a link added or taken (see lockFile.replaced);
//   - stat Path: it must still name that device and inode, now that the
//     lock is held (a rename over the path between the open and the lock
//     would leave the lock on a file nobody else opens).
//
// Anything else (the lock busy, a mismatch, an error) lets go and asks
// the agent, which waits, judges the file and decides as for any
// acquisition, and may hand out a fresh recipe. Such a hold writes no
// record, as a short hold of the library's writes none; when its token or
// owner is asked for, or it lasts RecordDelay, the client has the agent
// write the record on its behalf (WriteRecord) while it holds the lock,
// and has it erased again (EraseRecord) before it lets go.
//
// The recipe carries the owner record the agent's acquisition would have
// written as an opaque ticket, so that the agent keeps no table of the
// recipes it handed out and the client never reads or spells a record.

// Recipe is how a client takes, in its own process, a free kernel lock
// on one lock file (see above). The agent gives it to the client as JSON.
type Recipe struct {
	Path  string `json:"path"`
	Flags int    `json:"flags"`
	File
	// Ctime is the file's change time in ns, Size its size in bytes.
	Ctime int64 `json:"ctime_ns"`
	Size  int64 `json:"size"`
	// RecordDelay and LazyTick (ns): a hold that lasts RecordDelay has
	// its record written; the client looks every LazyTick while it
	// holds in-process locks (see recordDelay and lazyTick).
	RecordDelay int64 `json:"record_delay_ns"`
	LazyTick    int64 `json:"lazy_tick_ns"`
	// Ticket is the owner record the library would have written for the
	// acquisition the recipe was made from (the client's), for
	// WriteRecord; opaque to the client.
	Ticket []byte `json:"ticket"`
}

// File names a lock file a client holds in its own process: its path,
// and the device and inode it had when the client locked it.
type File struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// Written is what WriteRecord wrote for a client's in-process hold: the
// owner record (with its token) and, for EraseRecord, the record's bytes.
type Written struct {
	Owner  lock.Owner
	Record []byte
}

// ticketOwner is the owner of a hold taken with a recipe whose ticket is
// t, begun at startedAt: the record the library writes for its own
// exclusive kernel holds.
func ticketOwner(t []byte, startedAt time.Time) (lock.Owner, bool) {
	o, ok := lock.DecodeOwner(t)
	if !ok || o == nil {
		return lock.Owner{}, false
	}
	o.Fence, o.ID, o.StartedAt, o.Protocol, o.Shared, o.Released = 0, "", startedAt, "flock", false, false
	return *o, true
}
