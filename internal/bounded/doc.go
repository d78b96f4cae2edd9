// Package bounded runs outside processes with a bound on every wait: the
// product (nft, pasta), the bench (its anchors) and the tests (builds,
// binaries under test) use it, so that no step waits forever on a process
// that never exits or on a pipe a forgotten grandchild holds open.
package bounded
