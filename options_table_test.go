package hold

import "testing"

// TestAcceptsComplete checks the table of where each option applies: a
// row for every option, with a name, at least one entry point, and a
// reason for every entry point taking a lock that refuses it (Inspect and
// Break give their own).
func TestAcceptsComplete(t *testing.T) {
	names := map[string]bool{}
	for k := range numOptionKinds {
		a := accepts[k]
		switch {
		case a.name == "" || a.in == 0:
			t.Errorf("option %d has no row in accepts: %+v", k, a)
		case names[a.name]:
			t.Errorf("two rows name %s", a.name)
		case a.in&taking != taking && a.why == "":
			t.Errorf("%s is refused by %v without a reason", a.name, taking&^a.in)
		case a.in&taking == taking && a.why != "":
			t.Errorf("%s has a reason but every entry point taking a lock accepts it", a.name)
		}
		names[a.name] = true
	}
}
