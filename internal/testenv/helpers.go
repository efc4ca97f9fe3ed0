package testenv

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Eventually polls cond every few milliseconds until it holds, and fails
// t once bound has passed. The bound only turns a hang into a failure: a
// test never asserts how soon cond comes true.
func Eventually(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %v for %s", bound, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// names counts UniqueName's calls, so that two calls within one tick of
// the clock still differ.
var names atomic.Uint64

// UniqueName returns prefix followed by the test's name, the time and a
// count: a lock name that no other test uses, on a server that every test
// of a run, and the runs before it, share (an etcd cluster, a PostgreSQL
// database).
func UniqueName(t testing.TB, prefix string) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return prefix + name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatUint(names.Add(1), 36)
}
