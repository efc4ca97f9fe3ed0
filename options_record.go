package hold

// The options about what the owner record says (see Option).

// Field adds an extra field to the owner record, shown by `hold status`.
// The record is readable by anyone who can read the lock file: keep secrets
// out of it.
func Field(key, value string) Option {
	return Option{kind: optField, set: func(c *config) {
		if c.fields == nil {
			c.fields = make(map[string]string)
		}
		c.fields[key] = value
	}}
}

// OmitCommand leaves this process's command line out of the owner record,
// so that `hold status` and waiters see the holder's pid, host and start
// time but not what it runs. The command line is recorded by default, with
// values that look like secrets masked (docs/cli.md, "What hold writes and
// deletes"); the environment variable HOLD_RECORD_COMMAND=0 leaves it out
// for every lock a process takes.
func OmitCommand() Option {
	return Option{kind: optOmitCommand, set: func(c *config) { c.omitCommand = true }}
}
