package main

import (
	"os/exec"
	"strings"
	"testing"
)

// hold must start as fast as flock(1), so it links no network backend: their
// clients' package initialisation (gRPC, protobuf, the etcd and PostgreSQL
// drivers) would run on every local lock. Those live in the companions
// hold-remote and hold-postgres.
func TestLinksNoNetworkBackend(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"github.com/hold-dev/hold/etcd",
		"github.com/hold-dev/hold/postgres",
		"go.etcd.io/",
		"google.golang.org/grpc",
		"google.golang.org/protobuf",
		"github.com/jackc/pgx",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge: %q", out)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f) {
				t.Errorf("cmd/hold links %s; network backends belong in cmd/hold-remote", d)
			}
		}
	}
}
