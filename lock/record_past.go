package lock

import "strconv"

// AppendPastRecord appends what a lock file keeps once its holder has let
// go: the last fencing token and the released flag, nothing about who held
// it (no command line, which may carry secrets, no fields): one line,
// which PastRecordLen measures. Where size is larger, blanks and a final
// newline pad it to size bytes, so that one write over a longer record
// covers it whole; cut at PastRecordLen, what is left is the line alone,
// and either form is a valid record (IsRecord), so a crash between the
// write and the cut leaves one.
func AppendPastRecord(b []byte, fence uint64, size int) []byte {
	start := len(b)
	b = append(b, recordStart...)
	b = strconv.AppendUint(b, fence, 10)
	b = append(b, releasedKey+"true}\n"...)
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
	n := len(recordStart+releasedKey+"true}\n") + 1 // and the fence's first digit
	for ; fence >= 10; fence /= 10 {
		n++
	}
	return n
}
