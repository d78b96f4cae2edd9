// Package journal owns a run's on-disk journal on the runner's side: the
// file layout of a run directory, the writer the runner appends the agent's
// stdout with, the nonced exit sentinel, the input records, and the stderr
// tail a failed run's status carries. Reading a journal back (lines at
// byte offsets, and following it as it grows) is package follow's, so the
// runner links no inotify library.
package journal
