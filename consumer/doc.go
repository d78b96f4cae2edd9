// Package consumer owns job intake: the durable pull consumer on the jobs
// stream, fetching exactly one job per free slot (AckWait starts at
// delivery, so nothing is pre-buffered), decoding and resolving each job
// against the worker's profiles, and sending every job that cannot run to
// the DLQ stream with a reason a person can read, without stopping.
package consumer
