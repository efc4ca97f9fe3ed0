package etcd

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The keys under a lock's prefix P, one per holder or waiter, each bound
// to its process's lease:
//
//	P/<lease>-<n>        an exclusive holder or waiter; any other key whose
//	                     name sorts before "s" is taken for one too (etcd's
//	                     concurrency.Mutex puts P/<lease>)
//	P/s<N>-<lease>-<n>   a holder or waiter of a semaphore of N slots
//	P/~r-<lease>-<n>     a shared (reader) holder or waiter
//
// (<lease> and <n> in hex: n keeps two locks of one process apart, see
// takeSlot.) The names are chosen for the order etcd ranges keys in: hex
// digits sort before "s", and "s" before "~". So the keys a reader waits
// for (the exclusive ones) are the one range [P/, P/s), the keys of one
// semaphore the range [P/s<N>-, P/s<N>.), and the keys a semaphore
// request must find absent (exclusive ones, or another N's) the two ranges
// around it up to P/~; each is read, watched or compared in one request.
// Readers and a semaphore's places hold beside each other, as on kernel
// locks; an exclusive waiter waits for every earlier key.
const (
	readerMark = "~r-"
	slotsMark  = "s"
)

// keyKind is what a key under a lock's prefix stands for.
type keyKind struct {
	shared bool
	slots  int // N of a semaphore key, 0 for the others
}

// kindOf classifies a key by its name (the part after the prefix's "/").
func kindOf(key string) keyKind {
	name := key[strings.LastIndexByte(key, '/')+1:]
	if strings.HasPrefix(name, readerMark) {
		return keyKind{shared: true}
	}
	if rest, ok := strings.CutPrefix(name, slotsMark); ok {
		if digits, _, ok := strings.Cut(rest, "-"); ok {
			if n, err := strconv.Atoi(digits); err == nil && n > 1 {
				return keyKind{slots: n}
			}
		}
	}
	return keyKind{}
}

// describe names the kind for an error message.
func (k keyKind) describe() string {
	switch {
	case k.shared:
		return "a shared lock"
	case k.slots > 0:
		return fmt.Sprintf("a semaphore of %d slots", k.slots)
	}
	return "a plain (one-holder) lock"
}

// keyRange is the range of keys [start, end).
type keyRange struct{ start, end string }

// readerRange is the range of keys a reader of prefix waits for: the
// exclusive ones. Readers and a semaphore's places hold beside each other,
// as they do on kernel locks; an exclusive lock waits for both.
func readerRange(prefix string) keyRange { return keyRange{prefix, prefix + slotsMark} }

// notSlotsRange is, beside the range below a semaphore's keys, the range of
// the keys above them that a semaphore request must find absent: other
// semaphores' (another N), up to the readers', which may hold beside it.
func notSlotsRange(prefix string, n int) keyRange {
	return keyRange{slotsRange(prefix, n).end, prefix + "~"}
}

// allRange is every key of prefix, the range an exclusive waiter waits for.
func allRange(prefix string) keyRange {
	return keyRange{prefix, clientv3.GetPrefixRangeEnd(prefix)}
}

// slotsRange is the range of the keys of a semaphore of n slots.
func slotsRange(prefix string, n int) keyRange {
	s := prefix + slotsMark + strconv.Itoa(n)
	return keyRange{s + "-", s + "."}
}

// newest returns the options of a read of the newest key of r created
// before rev (any, when rev is 0): its count is of every such key.
func (r keyRange) newest(rev int64, more ...clientv3.OpOption) []clientv3.OpOption {
	opts := []clientv3.OpOption{clientv3.WithRange(r.end),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1)}
	if rev > 0 {
		opts = append(opts, clientv3.WithMaxCreateRev(rev))
	}
	return append(opts, more...)
}

// oldest returns the options of a read of the limit oldest keys of r (all,
// when limit is 0).
func (r keyRange) oldest(limit int64) []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithRange(r.end),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(limit)}
}

// none is the condition that no key of r exists.
func (r keyRange) none() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(r.start), "=", 0).WithRange(r.end)
}

// withPlace returns a semaphore holder's owner record with its place, the
// slot number from 0 to N-1, added as the field "slot": readers of the
// owner record ignore it, and the semaphore's holders read it to find the
// places taken.
func withPlace(record []byte, place int) []byte {
	// An encoded record is a JSON object and a newline.
	b := append([]byte(nil), record[:len(record)-2]...)
	b = append(b, `,"slot":`...)
	b = strconv.AppendInt(b, int64(place), 10)
	return append(b, "}\n"...)
}

// placeOf reads the place from a semaphore holder's key, false when it has
// none yet (it was granted, and is claiming one).
func placeOf(kv *mvccpb.KeyValue) (int, bool) {
	var v struct {
		Slot *int `json:"slot"`
	}
	if json.Unmarshal(kv.Value, &v) != nil || v.Slot == nil {
		return 0, false
	}
	return *v.Slot, true
}
