package randname

import "testing"

func TestHex(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range []int{1, 6, 8, 9, 16} {
		for range 100 {
			s := Hex(n)
			if len(s) != 2*n {
				t.Fatalf("Hex(%d) = %q: %d hex digits, want %d", n, s, len(s), 2*n)
			}
			if n >= 6 && seen[s] {
				t.Fatalf("Hex(%d) repeated %q", n, s)
			}
			seen[s] = true
		}
	}
}
