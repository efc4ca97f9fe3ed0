package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/hold-dev/hold/internal/gnuflag"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
)

// The network backends live in companion executables. Linking them into
// hold would make every local lock pay for them: the etcd client alone
// brings gRPC and protobuf, whose package initialisation took about 2 ms of
// hold's 4 ms start before anything was locked. So hold knows only the
// names of the remote address schemes and their flags. When a command line
// names such a target, hold hands the whole command line over to a
// companion (an exec on unix, so the process, its pid, its signals and its
// exit status stay the user's), before it has locked or started anything.
// A companion is this same command with backends registered: hold-remote
// has every backend; hold-postgres has only PostgreSQL's, so that a
// postgres:// command does not pay for etcd's initialisation either.

// remoteCommand is the companion that serves every network backend.
const remoteCommand = "hold-remote"

// dedicatedCommands are companions that serve one backend only, by scheme.
// hold prefers one when every network target of a command line is its
// backend's: a process initialises every package it links, and hold-remote
// links the etcd client, whose gRPC and protobuf packages take about 2 ms to
// initialise, a cost a PostgreSQL lock need not pay. When the dedicated
// companion is not installed, hold-remote serves its schemes as well.
var dedicatedCommands = map[string]string{
	"postgres":   "hold-postgres",
	"postgresql": "hold-postgres",
}

// remoteEnv is set for hold-remote when hold hands over to it, so that a
// companion that somehow lacks a backend fails instead of handing back.
const remoteEnv = "HOLD_REMOTE_HANDOFF"

// remoteSchemes are the address schemes hold-remote serves.
var remoteSchemes = []string{"etcd", "postgres", "postgresql"}

// Setting is a connection setting of a network backend: a flag, and the
// environment variable used when the flag is not given. Secrets belong in
// the variable: a flag shows in process lists.
type Setting struct {
	Flag, Env, Usage string
}

// Value returns the setting's flag value if the flag was given on fs,
// else its environment variable.
func (s Setting) Value(fs *gnuflag.FlagSet) string {
	if fs != nil {
		if f := fs.Lookup(s.Flag); f != nil && f.Changed {
			return f.Value.String()
		}
	}
	return os.Getenv(s.Env)
}

// DialTimeout returns how long a backend may take to connect for the
// command whose parsed flags are fs: at most def, and no longer than -w
// (--wait, --timeout) when it was given, so that `-w 2` bounds a cluster
// that does not answer at 2 s, not at the backend's own default. -n does
// not shorten it: it is about a busy lock, not a slow network.
func DialTimeout(fs *gnuflag.FlagSet, def time.Duration) time.Duration {
	if fs == nil {
		return def
	}
	f := fs.Lookup("wait")
	if f == nil || !f.Changed {
		f = fs.Lookup("timeout")
	}
	if f == nil || !f.Changed {
		return def
	}
	w, ok := f.Value.(*seconds)
	if !ok || *w <= 0 {
		return def
	}
	return min(def, time.Duration(float64(*w)*float64(time.Second)))
}

// The etcd settings. They are defined here, not in hold-remote, so that
// hold parses a command line that uses them before handing it over.
var (
	EtcdCA       = Setting{"etcd-ca", "HOLD_ETCD_CA", "CA certificate `FILE` to verify etcd's servers (TLS)"}
	EtcdCert     = Setting{"etcd-cert", "HOLD_ETCD_CERT", "client certificate `FILE` for etcd (TLS)"}
	EtcdKey      = Setting{"etcd-key", "HOLD_ETCD_KEY", "client key `FILE` for etcd (TLS)"}
	EtcdUser     = Setting{"etcd-user", "HOLD_ETCD_USER", "etcd user `NAME`"}
	EtcdPassword = Setting{"etcd-password", "HOLD_ETCD_PASSWORD", "etcd `PASSWORD` (prefer the environment variable: a flag shows in process lists)"}
	EtcdTTL      = Setting{"ttl", "HOLD_ETCD_TTL", "lease TTL in `SECONDS` for etcd locks: how long a crashed holder blocks others, and how long a paused one keeps the lock"}
)

// EtcdDefaultTTL is the etcd package's DefaultTTL in seconds, repeated here
// for the flag's help text (hold-remote's tests check that they agree).
const EtcdDefaultTTL = 15

// remoteSettings are every backend's settings, defined as lock flags.
var remoteSettings = []Setting{EtcdCA, EtcdCert, EtcdKey, EtcdUser, EtcdPassword, EtcdTTL}

func init() {
	registerLockFlag(func(fs *gnuflag.FlagSet) func() ([]hold.Option, error) {
		for _, s := range remoteSettings {
			usage := s.Usage + " (default $" + s.Env
			if s == EtcdTTL {
				usage += fmt.Sprintf(", else %d", EtcdDefaultTTL)
			}
			fs.String(s.Flag, "", usage+")")
		}
		return func() ([]hold.Option, error) { return nil, nil }
	})
}

// SchemeResolver turns an address-style target ("etcd://host:port/key")
// into the protocol serving it and the lock path (or key) within it. fs is
// the subcommand's parsed flag set, or nil.
type SchemeResolver = schemeResolver

// RegisterScheme makes targets of the form "SCHEME://..." resolve through
// r. hold-remote calls it from init functions for its backends.
func RegisterScheme(scheme string, r SchemeResolver) { registerScheme(scheme, r) }

// listSchemes resolve the address-style PATHs of `hold ls` for schemes
// whose lock addresses name one lock (postgres://...#name), so that a PATH
// can name a prefix of lock names, or none, instead.
var listSchemes = map[string]schemeResolver{}

// RegisterListScheme makes `hold ls SCHEME://...` resolve through r, which
// returns a protocol that can list its locks and the prefix of the names
// to list. Schemes without one list through their RegisterScheme resolver.
func RegisterListScheme(scheme string, r SchemeResolver) {
	if _, dup := listSchemes[scheme]; dup {
		panic("hold: list scheme registered twice: " + scheme)
	}
	listSchemes[scheme] = r
}

// Usagef returns a usage error (exit 64), for resolvers outside this
// package.
func Usagef(format string, args ...any) error { return usagef(format, args...) }

// addressScheme returns the scheme of an address-style target, or "".
func addressScheme(target string) string {
	scheme, _, ok := strings.Cut(target, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, `/\`) {
		return ""
	}
	return scheme
}

// isRemoteScheme reports whether scheme is served by hold-remote.
func isRemoteScheme(scheme string) bool {
	for _, s := range remoteSchemes {
		if s == scheme {
			return true
		}
	}
	return false
}

// handOffIfRemote hands the command line over to a companion when one of
// targets names a network backend this executable does not link. It
// returns only when none does (nil), or with the error that kept it from
// handing over; on unix a successful hand-over never returns, and on
// Windows it exits with the companion's status.
func handOffIfRemote(targets ...string) error {
	missing := ""   // the first scheme named that this executable lacks
	dedicated := "" // the one dedicated companion serving every remote scheme named, if any
	first := true
	for _, t := range targets {
		scheme := addressScheme(t)
		if scheme == "" || !isRemoteScheme(scheme) {
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
	if os.Getenv(remoteEnv) != "" {
		return fmt.Errorf("%s://: this executable (%s) does not serve the scheme it was handed", missing, filepath.Base(os.Args[0]))
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
		exe = besideSelf(remoteCommand)
	}
	if exe == "" && dedicated != "" {
		exe, _ = exec.LookPath(dedicated)
	}
	if exe == "" {
		var err error
		if exe, err = findRemote(); err != nil {
			return &errkind.ExecError{Cmd: remoteCommand, Err: fmt.Errorf("%w; %s:// targets are served by %s, which `go install github.com/hold-dev/hold/cmd/...@latest` installs beside hold", err, scheme, remoteCommand)}
		}
	}
	env := append(os.Environ(), remoteEnv+"=1")
	argv := append([]string{exe}, os.Args[1:]...)
	return execRemote(exe, argv, env)
}

// findRemote looks for hold-remote beside this executable, then on PATH.
func findRemote() (string, error) {
	if p := besideSelf(remoteCommand); p != "" {
		return p, nil
	}
	p, err := exec.LookPath(remoteCommand)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("%s not found beside hold or on PATH", remoteCommand)
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
