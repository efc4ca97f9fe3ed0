package cli

import (
	"github.com/hold-dev/hold/internal/gnuflag"

	"github.com/hold-dev/hold"
)

// --fair: wait in line (hold.Fair) on every subcommand that takes a lock.
func init() {
	registerLockFlag(func(fs *gnuflag.FlagSet) func() ([]hold.Option, error) {
		fair := fs.Bool("fair", false, "wait in line: fair waiters get the lock first come, first served (unix)")
		return func() ([]hold.Option, error) {
			if *fair {
				return []hold.Option{hold.Fair()}, nil
			}
			return nil, nil
		}
	})
}
