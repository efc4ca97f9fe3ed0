//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// hold ls etcd://HOST/PREFIX lists the etcd locks under the prefix, by
// way of hold-remote, with their holders and waiters.
func TestLsEtcdPrefix(t *testing.T) {
	t.Parallel()
	base := "etcd://" + startEtcd(t) + "/ls"
	dir := t.TempDir()
	holder, waiter := lsHolderAndWaiter(t, dir, base+"/deploy", base, "ls/deploy", "etcd")
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)
	waitExit(t, waiter)
	if got := lsJSON(t, dir, base); len(got) != 0 {
		t.Fatalf("hold ls %s after every holder left: %+v", base, got)
	}
}
