package testenv

import "testing"

// UnderWine reports whether the tests run under wine (scripts/wine-test
// runs the Windows test binaries there, in CI), not on Windows itself.
func UnderWine() bool { return underWine() }

// SkipUnderWine skips t under wine, where it fails for a reason that is
// wine's, not hold's: why says which difference from Windows. The message
// starts "wine:", which scripts/wine-test collects into the list of skips
// it prints at the end. Elsewhere it does nothing.
func SkipUnderWine(t testing.TB, why string) {
	t.Helper()
	if underWine() {
		t.Skipf("wine: %s", why)
	}
}
