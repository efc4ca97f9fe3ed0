// Package archtest holds tests of the module's shape rather than of its
// behaviour: which packages may import which (the layers: front ends on
// top, then the root API, then the protocols and their internals, the
// contract lock at the bottom), and that every public package's go doc
// shows what its types hold. It has no code of its own.
package archtest
