// Package lease owns the per-run lease that says which worker publishes a
// run: acquiring it (a KV Create, or a compare-and-set over a released
// lease), renewing it in the background by compare-and-set every TTL/3,
// handing it off (released, with the journal offset and chain sequence the
// successor resumes from) and deleting it when the run ends.
//
// The lease's epoch is the KV revision of the write that took it, so epochs
// strictly increase across holders. Liveness comes from the bucket TTL (the
// server expires a lease nobody renews and tells watchers with a purge
// marker); correctness does not depend on the lease alone, because every
// message of a run is also fenced on the run's chain (package publisher).
// Ownership is decided only by compare-and-set results, never by a read,
// since reads may be served by a lagging replica.
package lease
