// Command hold-remote is hold with its network backends linked in: it serves
// targets such as etcd://host:port/key and postgres://host/db#name. Users run
// hold, which hands a command line naming such a target over to hold-remote
// (found beside the hold executable, else on PATH); hold-remote accepts every
// command hold does.
//
// The backends live here rather than in hold so that a local lock never pays
// for initialising their clients. Each backend's glue is a package of its own
// (internal/etcdcli, internal/pgcli) that this command registers.
package main

import (
	"os"

	"github.com/hold-dev/hold/internal/cli"
	"github.com/hold-dev/hold/internal/etcdcli"
	"github.com/hold-dev/hold/internal/pgcli"
)

func init() {
	etcdcli.Register()
	pgcli.Register()
}

func main() {
	os.Exit(cli.Main())
}
