// Package doctest holds the test that runs the command examples of
// README.md and docs/*.md, so that an example that stops working fails the
// build. It has no code of its own; see doctest_test.go for the rules, and
// for the markers a document uses to set an example up or to say why it
// cannot run in a test.
package doctest
