package lock

import (
	"fmt"
	"strings"
)

// DescribeSlots says who holds each slot of the semaphore st reports
// (Slots and SlotHolders), for the hint of a busy semaphore's error:
// "all 3 slots are held: slot 0 by pid 12 (...); slot 1 by ...", "2 of 3
// slots are held: ...", or "3 slots, none held just now". It is the one
// wording every protocol's semaphore uses.
func (st *Status) DescribeSlots() string {
	held := 0
	for _, h := range st.SlotHolders {
		if h != nil {
			held++
		}
	}
	if held == 0 {
		return fmt.Sprintf("%d slots, none held just now", st.Slots)
	}
	var b strings.Builder
	if held == st.Slots {
		fmt.Fprintf(&b, "all %d slots are held", st.Slots)
	} else {
		fmt.Fprintf(&b, "%d of %d slots are held", held, st.Slots)
	}
	sep := ": "
	for i, h := range st.SlotHolders {
		if h != nil {
			fmt.Fprintf(&b, "%sslot %d by %s", sep, i, h)
			sep = "; "
		}
	}
	return b.String()
}
