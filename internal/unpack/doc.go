// Package unpack extracts a workspace archive (a tar, optionally gzipped,
// told apart by its magic bytes) into a directory safely: the archive is
// outside data, made by anyone who may submit a job, and extraction runs
// as root on the worker's host.
//
// Nothing is written outside the directory: names are relative and never
// climb with "..", and no entry is written through a symbolic link, a
// file or anything but a directory an earlier entry of the same archive
// created (the classic tar-slip through a link), which the os.Root every
// operation goes through would refuse anyway. Symbolic links are kept
// only when every one of them, resolved through the others, stays inside;
// hard links only to earlier regular files of the archive. Devices, FIFOs
// and sockets are refused; setuid, setgid and sticky bits are cleared.
// The files' total size (with the bytes of the headers' names, link
// names and PAX records), the entries and the uncompressed stream are
// bounded, so a gzip bomb stops at the limit, and a full disk stops it
// with ErrLimit too. A name is refused before any work for it when it is
// longer than 4,095 bytes, has a component longer than 255 or is deeper
// than MaxDepth (256).
//
// Work is linear in the archive: each entry's directories are entered
// (or made) by descriptor from the one above, a few syscalls a level,
// from a short stack of the current path's descriptors, so neighbouring
// entries share them; the context is checked at each component. What
// the archive made is read from the tree itself (which starts empty), so
// no name is kept but links' (for the final check) and directories'
// (their modes are set last). The tree is written by an fstree.Writer,
// which owns the names' checks and bounds; fstree.WriteFiles writes a
// job's files the same way, as later entries.
//
// A failed extraction leaves a partial tree: the caller discards it (a
// run's workspace is never used half extracted).
package unpack
