package lock

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
