// Package fstree writes names into a directory tree by descriptors, the
// core both a workspace archive's extraction (internal/unpack) and a
// job's seed files (sandbox.WriteSeeds) share. It owns what a name may
// be (Clean, the bounds MaxPath, MaxComponent and DefaultMaxDepth) and
// the Writer: a short stack of the current path's directory descriptors,
// each directory entered (or made) from the one above with
// O_NOFOLLOW|O_DIRECTORY, so nothing is written through a link, a file
// or anything but a directory, and a deep name costs a few syscalls a
// level while neighbouring names share their directories.
//
// It links only the standard library and golang.org/x/sys: baton-runner
// imports it (through sandbox and protocol) and every live runner
// process pays for its packages' init, so nothing of tar or gzip belongs
// here. The sentinels' texts say "archive" as they did before the split,
// since callers' messages show them.
package fstree
