package hold

import "github.com/hold-dev/hold/internal/fairq"

// fairProtocol puts the FIFO queue in front of p (Fair).
func fairProtocol(p Protocol) Protocol {
	if p.Name() == "etcd" {
		return p
	}
	return fairq.New(p)
}
