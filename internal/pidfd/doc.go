// Package pidfd waits for processes to exit through their pidfds, on the
// Go runtime's poller: no thread blocks, and nothing wakes periodically.
// The sandbox watches its stages and runners with it, and a worker its
// siblings on the node.
package pidfd
