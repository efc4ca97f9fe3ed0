package main

import (
	"testing"
	"time"

	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/internal/lockspec"
)

// hold's help text repeats the etcd package's default TTL, since hold does
// not link the package; this keeps the two in step.
func TestEtcdDefaultTTLMatches(t *testing.T) {
	if got, want := time.Duration(lockspec.EtcdDefaultTTL)*time.Second, etcd.DefaultTTL; got != want {
		t.Fatalf("lockspec.EtcdDefaultTTL is %v, etcd.DefaultTTL is %v", got, want)
	}
}
