// Package checkpoint keeps a session's files between its runs: the
// agent's workspace and its home, stored in the JetStream Object Store
// when a run ends and restored, on any node, before the next run's agent
// starts.
//
// A checkpoint is two objects: its data, a tar whose names start with
// "workspace/" or "home/", and its manifest (msgpack), which names the
// chain of data objects a restore reads, base first. The base holds the
// whole tree; each later checkpoint holds only what changed since its
// parent (files, directories and links added or changed, with their
// modes) and lists what was deleted. A change is found by the stat of
// each path against an index of the tree as the restore or the last
// checkpoint left it (type, mode, size, mtime, ctime, inode: the ctime
// is the kernel's and no agent sets it), so a checkpoint after a one-file
// change reads one file, however large the tree. A checkpoint is written
// whole again (a new base) when its chain would grow past MaxChain
// objects or hold more than twice the tree's bytes, which bounds what a
// restore reads.
//
// A restore reads the manifests first, works out which object holds the
// last version of each path, and streams only those entries, in chain
// order, into one extraction per root (internal/unpack, with the rules of
// a workspace archive: nothing written outside, nothing through a link,
// no device, bounded bytes and entries), so each file is written once.
// Links keep their targets as the agent made them (unpack.LinksAsIs):
// they are written, never followed.
//
// The trees are the agent's and may be hostile: they are read by
// descriptors (internal/fsat), never through a link; FIFOs, sockets and
// devices are skipped with a note, and what lies deeper than MaxDepth or
// past MaxEntries and MaxBytes stops the checkpoint with ErrLimit. Hard
// links are stored as separate files.
//
// Object names depend only on the session, the run and the kind of
// checkpoint, so a successor that redoes the checkpoint of a worker that
// died writes the same objects again, and a session's head names one of
// them only once a run's terminal status did (see package worker).
package checkpoint
