package hold

import "log/slog"

// The options about debugging (see Option).

// Logger sends debug events (waiting, queued, acquired, released, lost,
// and the protocol's own steps) to l at slog.LevelDebug, and what an
// Update let happen (an owner change, a directory not synced) at
// slog.LevelWarn. Without it hold logs nothing, and pays nothing for it.
func Logger(l *slog.Logger) Option {
	return Option{kind: optLogger, set: func(c *config) { c.logger = l }}
}
