package cli

import (
	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/lockspec"
)

// execLocked is -F, which needs exec: Windows has none, so hold cannot
// hand its place, and with it the lock, to the command.
func execLocked(l *hold.Lock, spec *lockspec.Resolved, argv []string) error {
	return usagef("--no-fork needs exec, which Windows lacks; leave -F out: hold run keeps the lock until the command exits")
}
