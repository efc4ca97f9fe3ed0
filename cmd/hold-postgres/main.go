// Command hold-postgres is hold with only its PostgreSQL backend linked in:
// it serves postgres:// and postgresql:// targets. Users run hold, which
// hands a command line whose network targets are all PostgreSQL ones over to
// hold-postgres when it is installed (beside the hold executable, else on
// PATH), and to hold-remote otherwise; hold-postgres accepts every command
// hold does.
//
// It exists beside hold-remote, which serves every network backend, because
// a process pays for the package initialisation of everything it links:
// hold-remote's etcd client brings gRPC and protobuf, whose initialisation
// costs more than a PostgreSQL lock's round trips (docs/postgres.md).
package main

import (
	"os"

	"github.com/hold-dev/hold/internal/cli"
	"github.com/hold-dev/hold/internal/pgcli"
)

func init() {
	pgcli.Register()
}

func main() {
	os.Exit(cli.Main())
}
