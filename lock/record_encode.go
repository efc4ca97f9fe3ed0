package lock

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Encode returns the record as one line of JSON ending in a newline.
func (o *Owner) Encode() []byte { return o.AppendEncode(nil) }

// AppendEncode appends the record, as Encode returns it, to b. It writes
// the same JSON encoding/json would for Owner (the fuzz tests hold it to
// that), by hand, because a lock's every acquisition writes a record and
// reflection made that a tenth of its cost. The fence comes first, so
// that DecodeFence can usually read it without parsing the rest, and the
// released flag second, so that IsPastRecord can tell a past record by
// its start.
func (o *Owner) AppendEncode(b []byte) []byte {
	b = append(b, recordStart...)
	b = strconv.AppendUint(b, o.Fence, 10)
	b = append(b, releasedKey...)
	b = strconv.AppendBool(b, o.Released)
	b = append(b, `,"`+namePID+`":`...)
	b = strconv.AppendInt(b, int64(o.PID), 10)
	if o.Host != "" {
		b = append(b, `,"`+nameHost+`":`...)
		b = appendString(b, o.Host)
	}
	if o.ID != "" {
		b = append(b, `,"`+nameToken+`":`...)
		b = appendString(b, o.ID)
	}
	b = append(b, `,"`+nameStartedAt+`":"`...)
	// Always in UTC: readers take any offset, and formatting in the local
	// zone would make every acquisition read the zone file.
	b = o.StartedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if o.ProcStart != 0 {
		b = append(b, `,"`+nameProcStart+`":`...)
		b = strconv.AppendUint(b, o.ProcStart, 10)
	}
	if o.PIDNS != 0 {
		b = append(b, `,"`+namePIDNS+`":`...)
		b = strconv.AppendUint(b, o.PIDNS, 10)
	}
	if o.BootID != "" {
		b = append(b, `,"`+nameBootID+`":`...)
		b = appendString(b, o.BootID)
	}
	if len(o.Command) > 0 {
		b = append(b, `,"`+nameCommand+`":[`...)
		for i, a := range o.Command {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, a)
		}
		b = append(b, ']')
	}
	if o.Shared {
		b = append(b, `,"`+nameShared+`":true`...)
	}
	if o.Protocol != "" {
		b = append(b, `,"`+nameProtocol+`":`...)
		b = appendString(b, o.Protocol)
	}
	if len(o.Fields) > 0 {
		b = append(b, `,"`+nameFields+`":{`...)
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
