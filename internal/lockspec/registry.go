package lockspec

import (
	"os"
	"slices"
	"strings"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
)

// DefaultProtocol is the protocol used when neither the request nor
// HOLD_PROTOCOL names one: the kernel lock.
const DefaultProtocol = "flock"

// ProtocolEnv names the environment variable that sets the default protocol.
const ProtocolEnv = "HOLD_PROTOCOL"

// DefaultProtocolName is the protocol a request that names none gets.
func DefaultProtocolName() string {
	if p := os.Getenv(ProtocolEnv); p != "" {
		return p
	}
	return DefaultProtocol
}

// protocolEntry is a protocol a request can name.
type protocolEntry struct {
	summary string
	open    func() (hold.Protocol, error)
	// fixed and fixedOpt are set for a protocol that is one value for
	// good (RegisterFixedProtocol): resolving it then allocates nothing.
	fixed    hold.Protocol
	fixedOpt hold.Option
}

// resolve returns the entry's protocol and the option that selects it.
func (e *protocolEntry) resolve() (hold.Protocol, hold.Option, error) {
	if e.fixed != nil {
		return e.fixed, e.fixedOpt, nil
	}
	p, err := e.open()
	if err != nil {
		return nil, hold.Option{}, err
	}
	return p, hold.WithProtocol(p), nil
}

// SchemeResolver turns an address-style target ("etcd://host:port/key")
// into the protocol serving it and the lock path (or key) within it. s is
// the request, whose Settings and DialTimeout the resolver reads; it may
// be nil.
type SchemeResolver func(target string, s *Spec) (proto hold.Protocol, lockPath string, err error)

// The extension tables. They are filled by init functions and only read
// afterwards.
var (
	protocols   = map[string]*protocolEntry{}
	schemes     = map[string]SchemeResolver{}
	listSchemes = map[string]SchemeResolver{}
)

func init() {
	RegisterFixedProtocol(DefaultProtocol, "kernel lock: flock(2) on unix, LockFileEx on Windows (default)", hold.DefaultProtocol())
}

// RegisterProtocol makes a protocol selectable by name (--protocol NAME,
// HOLD_PROTOCOL, a request's "protocol"). open is called for every
// request; if the protocol it returns implements lock.Closer (a network
// client), it is closed when the request is done.
func RegisterProtocol(name, summary string, open func() (hold.Protocol, error)) {
	register(name, &protocolEntry{summary: summary, open: open})
}

// RegisterFixedProtocol is RegisterProtocol for a protocol that is the
// same value for every request and holds nothing open.
func RegisterFixedProtocol(name, summary string, p hold.Protocol) {
	register(name, &protocolEntry{summary: summary, fixed: p, fixedOpt: hold.WithProtocol(p)})
}

func register(name string, e *protocolEntry) {
	if _, dup := protocols[name]; dup {
		panic("hold: protocol registered twice: " + name)
	}
	protocols[name] = e
}

// RegisterScheme makes targets of the form "SCHEME://..." resolve through r.
func RegisterScheme(scheme string, r SchemeResolver) {
	if _, dup := schemes[scheme]; dup {
		panic("hold: address scheme registered twice: " + scheme)
	}
	schemes[scheme] = r
}

// RegisterListScheme makes `hold ls SCHEME://...` resolve through r, which
// returns a protocol that can list its locks and the prefix of the names
// to list: for schemes whose addresses name one lock (postgres://...#name),
// so that a listed address can name a prefix, or none, instead. Schemes
// without one list through their RegisterScheme resolver.
func RegisterListScheme(scheme string, r SchemeResolver) {
	if _, dup := listSchemes[scheme]; dup {
		panic("hold: list scheme registered twice: " + scheme)
	}
	listSchemes[scheme] = r
}

// ProtocolNames lists the registered protocols, sorted.
func ProtocolNames() []string {
	names := make([]string, 0, len(protocols))
	for n := range protocols {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ProtocolSummary returns the one-line description of a registered
// protocol, and whether there is one by that name.
func ProtocolSummary(name string) (string, bool) {
	e, ok := protocols[name]
	if !ok {
		return "", false
	}
	return e.summary, true
}

// SchemeNames lists the address schemes this executable serves, sorted,
// or "none".
func SchemeNames() []string {
	names := make([]string, 0, len(schemes))
	for n := range schemes {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}

// Serves reports whether this executable links the backend of scheme.
func Serves(scheme string) bool {
	_, ok := schemes[scheme]
	return ok
}

// AddressScheme returns the scheme of an address-style target, or "".
func AddressScheme(target string) string {
	scheme, _, ok := strings.Cut(target, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, `/\`) {
		return ""
	}
	return scheme
}

// ResolveAddress returns the protocol serving an address-style target
// ("etcd://host:port/key") and the lock path (or key) within it, handing
// the process over to a companion first if this executable does not serve
// the scheme. s is the request, or nil.
func ResolveAddress(target string, s *Spec) (hold.Protocol, string, error) {
	if err := HandOffIfRemote(target); err != nil {
		return nil, "", err
	}
	scheme := AddressScheme(target)
	resolve, known := schemes[scheme]
	if !known {
		return nil, "", errkind.Usagef("unknown address scheme %q in %q (known: %s)", scheme, target, strings.Join(SchemeNames(), ", "))
	}
	return resolve(target, s)
}

// ResolveList is ResolveAddress for listing: it returns a protocol that
// can list locks and the prefix of the names to list.
func ResolveList(target string, s *Spec) (hold.Protocol, string, error) {
	if err := HandOffIfRemote(target); err != nil {
		return nil, "", err
	}
	if r, ok := listSchemes[AddressScheme(target)]; ok {
		return r(target, s)
	}
	return ResolveAddress(target, s)
}
