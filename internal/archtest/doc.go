// Package archtest holds tests of the module's shape rather than of its
// behaviour: which packages may import which (the layers: front ends on
// top, then the root API, then the protocols and their internals, the
// contract lock at the bottom), that every public package's go doc
// shows what its types hold, and that every name the root exports serves
// a program that takes locks, not only hold's own front ends. It has no
// code of its own.
package archtest
