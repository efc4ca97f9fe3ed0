package lockspec

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/hold-dev/hold/internal/errkind"
)

// The network backends live in companion executables. Linking them into
// hold would make every local lock pay for them: the etcd client alone
// brings gRPC and protobuf, whose package initialisation would be a large
// part of hold's start before anything is locked. So hold knows only the
// names of the remote address schemes and their flags. When a command line
// names such a target, hold hands the whole command line over to a
// companion (an exec on unix, so the process, its pid, its signals and its
// exit status stay the user's), before it has locked or started anything.
// A companion is this same command with backends registered: hold-remote
// has every backend; hold-postgres has only PostgreSQL's, so that a
// postgres:// command does not pay for etcd's initialisation either.

// RemoteCommand is the companion that serves every network backend.
const RemoteCommand = "hold-remote"

// dedicatedCommands are companions that serve one backend only, by scheme.
// hold prefers one when every network target of a command line is its
// backend's: a process initialises every package it links, and hold-remote
// links the etcd client, whose gRPC and protobuf packages a PostgreSQL lock
// need not pay to initialise. When the dedicated
// companion is not installed, hold-remote serves its schemes as well.
var dedicatedCommands = map[string]string{
	"postgres":   "hold-postgres",
	"postgresql": "hold-postgres",
}

// RemoteEnv is set for hold-remote when hold hands over to it, so that a
// companion that somehow lacks a backend fails instead of handing back.
const RemoteEnv = "HOLD_REMOTE_HANDOFF"

// RemoteSchemes are the address schemes hold-remote serves.
var RemoteSchemes = []string{"etcd", "postgres", "postgresql"}

// IsRemoteScheme reports whether scheme is served by hold-remote.
func IsRemoteScheme(scheme string) bool {
	for _, s := range RemoteSchemes {
		if s == scheme {
			return true
		}
	}
	return false
}

// HandOffIfRemote hands the command line over to a companion when one of
// targets names a network backend this executable does not link. It
// returns only when none does (nil), or with the error that kept it from
// handing over; on unix a successful hand-over never returns, and on
// Windows it exits with the companion's status.
func HandOffIfRemote(targets ...string) error {
	missing := ""   // the first scheme named that this executable lacks
	dedicated := "" // the one dedicated companion serving every remote scheme named, if any
	first := true
	for _, t := range targets {
		scheme := AddressScheme(t)
		if scheme == "" || !IsRemoteScheme(scheme) {
			continue
		}
		if first {
			dedicated, first = dedicatedCommands[scheme], false
		} else if dedicatedCommands[scheme] != dedicated {
			dedicated = ""
		}
		if _, linked := schemes[scheme]; !linked && missing == "" {
			missing = scheme
		}
	}
	if missing == "" {
		return nil
	}
	if os.Getenv(RemoteEnv) != "" {
		self, _ := os.Executable()
		return fmt.Errorf("%s://: this executable (%s) does not serve the scheme it was handed", missing, filepath.Base(self))
	}
	return handOff(missing, dedicated)
}

// handOff runs a companion with this process's arguments in its place: the
// dedicated one if it is not empty and installed, else hold-remote. One
// beside this executable (the same installation) comes before one on PATH.
func handOff(scheme, dedicated string) error {
	exe := ""
	if dedicated != "" {
		exe = besideSelf(dedicated)
	}
	if exe == "" {
		exe = besideSelf(RemoteCommand)
	}
	if exe == "" && dedicated != "" {
		exe, _ = exec.LookPath(dedicated)
	}
	if exe == "" {
		var err error
		if exe, err = FindRemote(); err != nil {
			return &errkind.ExecError{Cmd: RemoteCommand, Err: fmt.Errorf("%w; %s:// targets are served by %s, which `go install ./cmd/...` in a clone of hold installs beside hold", err, scheme, RemoteCommand)}
		}
	}
	env := append(os.Environ(), RemoteEnv+"=1")
	// The companion gets the command line as the user typed it, hold's
	// name included, so that what it records as the holder's command (and
	// ps shows) is `hold run ...`, not the companion's name.
	argv := append([]string{os.Args[0]}, os.Args[1:]...)
	return execRemote(exe, argv, env)
}

// FindRemote looks for hold-remote beside this executable, then on PATH.
func FindRemote() (string, error) {
	if p := besideSelf(RemoteCommand); p != "" {
		return p, nil
	}
	p, err := exec.LookPath(RemoteCommand)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("%s not found beside hold or on PATH", RemoteCommand)
		}
		return "", err
	}
	return p, nil
}

// besideSelf returns the path of the executable command in this
// executable's directory, or "" if there is none.
func besideSelf(command string) string {
	if runtime.GOOS == "windows" {
		command += ".exe"
	}
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(self); err == nil {
		self = resolved
	}
	p := filepath.Join(filepath.Dir(self), command)
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p
	}
	return ""
}
