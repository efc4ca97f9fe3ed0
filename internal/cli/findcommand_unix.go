//go:build unix

package cli

// defaultPath is where a command is looked for when PATH is not set: the
// path POSIX's confstr(_CS_PATH) gives and glibc's execvp(3) uses.
const defaultPath = "/bin:/usr/bin"
