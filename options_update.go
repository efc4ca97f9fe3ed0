package hold

// The options about what Update and Append may do to their file (see Option).

// MustExist makes Update and Append fail, with an error matching
// fs.ErrNotExist, when the file does not exist, instead of reading it as
// empty (Update) or creating it (Append).
func MustExist() Option {
	return Option{kind: optMustExist, set: func(c *config) { c.mustExist = true }}
}

// AllowEmpty lets Update empty the file: without it, empty content from
// fn (nil included) is refused with an error matching ErrEmpty, and the
// file is left as it was. A missing file stays missing either way: empty
// content for it writes nothing. Append refuses it (ErrInvalidOption):
// an append adds to the file.
func AllowEmpty() Option {
	return Option{kind: optAllowEmpty, set: func(c *config) { c.allowEmpty = true }}
}

// AllowSplit lets Update replace a file that has other hard links. The
// replacement is a new file renamed over path, so the other names keep
// the old content: the link is split. Without it such a file is refused
// with ErrHardLinked. Append refuses it (ErrInvalidOption): an append
// writes in place, so it never splits a link.
func AllowSplit() Option {
	return Option{kind: optAllowSplit, set: func(c *config) { c.allowSplit = true }}
}

// AllowOwnerChange lets Update replace a file whose owner or group this
// process cannot give the replacement (only root may give a file to
// another user; only a member of a group may give it to that group). The
// replacement then belongs to this process's user, and keeps the file's
// group where this process is a member; the change is logged through
// Logger. Without it such a file is refused with ErrOwnerNotKept before fn
// is called. Append refuses it (ErrInvalidOption): an append writes in
// place, so the file keeps its owner.
func AllowOwnerChange() Option {
	return Option{kind: optAllowOwnerChange, set: func(c *config) { c.allowOwnerChange = true }}
}
