// Package journal owns a run's on-disk journal: the file layout of a run
// directory, the writer the runner appends the agent's stdout with, the
// nonced exit sentinel, the line reader that splits the journal at byte
// offsets, the follower that streams complete lines to the worker as they
// are appended (inotify, one instance shared by the whole process), and the
// stderr tail a failed run's status carries.
package journal
