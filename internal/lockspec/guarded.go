package lockspec

import (
	"errors"

	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/guard"
)

// FileError labels an error about FILE the way the library does
// (guard.Label). The front ends' own errors (bad input, a filter that
// could not start) keep their kind, and so their exit status.
func FileError(op, file string, err error) error {
	var usage *errkind.UsageError
	var exec *errkind.ExecError
	if errors.As(err, &usage) || errors.As(err, &exec) {
		return err
	}
	return guard.Label(op, file, err)
}
