package main

import (
	"os/exec"
	"strings"
	"testing"
)

// hold-postgres exists to serve postgres:// targets without initialising
// the etcd client: it must link no etcd, gRPC or protobuf package, or it
// starts no faster than hold-remote. It must link the PostgreSQL backend.
func TestLinksOnlyPostgres(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"github.com/hold-dev/hold/etcd",
		"go.etcd.io/",
		"google.golang.org/grpc",
		"google.golang.org/protobuf",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge: %q", out)
	}
	postgres := false
	for _, d := range deps {
		postgres = postgres || d == "github.com/hold-dev/hold/postgres"
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f) {
				t.Errorf("cmd/hold-postgres links %s; it is for PostgreSQL only", d)
			}
		}
	}
	if !postgres {
		t.Error("cmd/hold-postgres does not link the postgres package")
	}
}
