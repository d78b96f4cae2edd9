// Package client is baton's Go client: it submits jobs, watches a run's
// chain of events (replaying it from the start, then following it live, with
// chunked lines put back together), reads and cancels run records, answers
// and lists the approvals a run's policy asks a person about (Approve,
// Approvals, WatchApprovals), and lists rejected jobs from the dead-letter
// stream.
//
// A Client needs only a JetStream handle and the deployment's names; it holds
// no goroutines of its own, so it needs no Close. Every call takes a context
// that bounds it. An option given a value it cannot take makes New fail with
// an error wrapping ErrInvalidOption, as nats.go's jetstream options do.
//
// The protocol it speaks is plain NATS (see package protocol): any client in
// any language can do the same with publishes, a subscription and requests
// to the workers' read relay (README, "Reading through the relay").
package client
