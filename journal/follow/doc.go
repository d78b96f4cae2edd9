// Package follow reads a run's journal back for the worker: ReadLines
// splits it into complete lines at byte offsets, and Follow streams them as
// they are appended (inotify, one instance shared by the whole process)
// until the run's sentinel.
package follow
