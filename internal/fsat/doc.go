// Package fsat reads a tree that someone else controls (an agent's
// workspace or home) by directory descriptors: every open is relative to
// its parent's descriptor, one syscall a step, and never follows a link,
// since the tree's owner may swap any name for a link at any time. A
// directory or file made unreadable by its owner is made readable again
// when the caller owns it (root reads it anyway).
//
// It links only the standard library and golang.org/x/sys.
package fsat
