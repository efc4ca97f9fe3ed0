// Package doctest holds the tests that keep the repository to what its
// documentation says: the command examples of README.md and docs/*.md run
// (see doctest_test.go for the rules, and for the markers a document uses
// to set an example up or to say why it cannot run in a test), file
// names follow the build-constraint convention of docs/development.md
// (buildnames_test.go), and every path docs/architecture.md names exists
// (architecture_test.go). It has no code of its own.
package doctest
