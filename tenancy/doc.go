// Package tenancy owns how one worker pool is shared between concurrency
// keys (tenants, users): the keys' slots across the cluster, one KV entry
// per running job of a key, created only below the key's limit so no race
// can exceed it (Slots); and the weighted round-robin that orders the keys
// with jobs waiting when a slot frees (Fair). It holds no job: the
// consumer takes a key's jobs from its lanes of the jobs stream.
package tenancy
