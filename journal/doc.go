// Package journal owns a run's on-disk journal: the file layout of a run
// directory, the writer the runner appends the agent's stdout with, the
// nonced exit sentinel, the line reader that splits the journal at byte
// offsets, and the follower that streams complete lines to the worker as
// they are appended.
package journal
