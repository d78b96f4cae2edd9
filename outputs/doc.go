// Package outputs captures what a run left in its workspace and keeps it in
// the JetStream Object Store: a unified diff of the workspace against the
// baseline it was seeded with (<runId>/diff.patch) and the files a profile's
// globs choose (<runId>/files/<SHA-256 of the path>, the path in metadata),
// each with its size and SHA-256.
//
// The workspace is the agent's and may be hostile: capture walks it by
// directory descriptors (one syscall a step, whatever the depth), never
// follows a symbolic link (it is recorded as a link), skips FIFOs, devices
// and sockets with a note, and what lies deeper than MaxDepth or past
// MaxPathBytes, reads a tree made unreadable, escapes names that are not
// printable UTF-8, and stops at a byte, entry and file limit with a reason
// instead of running out of time or memory. The baseline is never
// read from the workspace: the caller passes it from where the agent cannot
// write (FilesBaseline: the seed files the run's spec keeps; TreeBaseline:
// a directory where the worker extracted the run's workspace archive again,
// read from the store, with the seed files written over it).
//
// Capture is idempotent: the object names depend only on the run and the
// paths, and putting an object of an existing name replaces it, so a
// successor that redoes the capture of a worker that died stores the same
// objects and no duplicate.
package outputs
