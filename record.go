package hold

import "github.com/hold-dev/hold/internal/proc"

// Field adds an extra field to the owner record, shown by `hold status`.
// The record is readable by anyone who can read the lock file: keep secrets
// out of it.
func Field(key, value string) Option {
	return func(c *config) {
		if c.fields == nil {
			c.fields = make(map[string]string)
		}
		c.fields[key] = value
	}
}

// OmitCommand leaves this process's command line out of the owner record,
// so that `hold status` and waiters see the holder's pid, host and start
// time but not what it runs. The command line is recorded by default, with
// values that look like secrets masked (see the README); the environment
// variable HOLD_RECORD_COMMAND=0 leaves it out for every lock a process
// takes.
func OmitCommand() Option { return func(c *config) { c.omitCommand = true } }

// shapeOwner applies Field and OmitCommand to the owner record a request
// publishes.
func (c *config) shapeOwner(o *Owner) {
	if c.omitCommand || !proc.RecordCommand() {
		o.Command = nil
	}
	if len(c.fields) > 0 {
		o.Fields = make(map[string]string, len(c.fields))
		for k, v := range c.fields {
			o.Fields[k] = v
		}
	}
}
