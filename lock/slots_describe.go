package lock

import (
	"fmt"
	"strings"
)

// DescribeSlots says who holds each place of the semaphore st reports
// (Slots and SlotHolders): "2 of 3 slots held; slot 0 by pid 12 (...);
// slot 2 by ...". The network protocols put it in the hint of a busy
// semaphore's error.
func (st *Status) DescribeSlots() string {
	var b strings.Builder
	held := 0
	for _, h := range st.SlotHolders {
		if h != nil {
			held++
		}
	}
	fmt.Fprintf(&b, "%d of %d slots held", held, st.Slots)
	for i, h := range st.SlotHolders {
		if h != nil {
			fmt.Fprintf(&b, "; slot %d by %s", i, h)
		}
	}
	return b.String()
}
