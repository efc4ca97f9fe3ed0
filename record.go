package hold

import "github.com/hold-dev/hold/internal/proc"

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
