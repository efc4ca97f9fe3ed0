// Command hold runs commands under cross-process locks and reports who holds
// them.
//
//	hold run [flags] TARGET -- COMMAND [ARGS...]
//	hold run [flags] TARGET -c 'shell command'
//	hold status [--json] TARGET...
//
// Its flags and exit codes follow flock(1); see `hold help` and docs/cli.md.
// This executable links only the local protocols. A target naming a network
// backend (etcd://..., postgres://...) is served by a companion command,
// hold-postgres for PostgreSQL, else hold-remote, which
// `go install github.com/hold-dev/hold/cmd/...@latest` installs beside it.
package main

import (
	"os"

	"github.com/hold-dev/hold/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
