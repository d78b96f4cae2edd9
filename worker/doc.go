// Package worker owns a baton worker's runs: it provisions NATS resources,
// takes jobs from the consumer, creates each run's record and lease, starts
// the runner chain, follows the journal and publishes every line on the
// run's fenced chain, renews the lease, heartbeats its node, honours cancel
// requests, and ends each run with exactly one terminal status.
package worker
