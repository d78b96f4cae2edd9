// Package bench is baton's benchmark suite (`baton bench`): it starts its
// own nats-server, workers as separate processes of the baton binary, and
// real sandboxed runs, and measures them against the targets of the
// design (pipeline throughput, latency, start, hand-off, crash, scale).
// Every figure is a ratio against an anchor measured in the same run, or a
// median over repeated runs, because the machines are noisy.
//
// It also holds the two helpers the suite runs in other processes: a
// stamping agent, whose lines carry the wall-clock time they were written
// at, and a probe worker, a real worker that reports its goroutines.
package bench
