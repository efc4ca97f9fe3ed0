package cli

// defaultPath is empty on Windows: its own rules (the current directory,
// the system directories) already apply without PATH.
const defaultPath = ""
