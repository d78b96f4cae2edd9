// Package lease owns the per-run lease that says which worker publishes a
// run, and the per-worker liveness key that keeps a worker's leases alive.
//
// A worker opens one Liveness (Live): a key live.<node>.<worker> in the
// leases bucket, created with a per-message TTL and renewed by
// compare-and-set every TTL/3. Its value names a random session. A run's
// lease is written only when it is taken (Acquire: a KV Create, or a
// compare-and-set over a released lease or over one whose holder's session
// is gone), handed off (Release: released, with the journal offset and chain
// sequence the successor resumes from) and ended (Delete); while held it
// names its holder's session and costs no write. So upkeep grows with
// workers, not with runs.
//
// A held lease is live while its holder's liveness key carries its session.
// A worker that cannot renew its key within TTL - TTL/6 of the last renewal
// that landed loses every lease of the session at once, before the key can
// expire on the server (TTL after that write was stored); it then opens a
// new session once the old key is gone. The key's expiry leaves a marker
// (the bucket's LimitMarkerTTL), which the node's workers watch to recover
// the runs of a worker that died. The renewals, the deadline of a
// session and the release of a stopped lease are timed on the liveness's
// clock (WithClock; the system's by default), which a test moves itself.
//
// The lease's epoch is the KV revision of the write that took it, so epochs
// strictly increase across holders. Correctness does not depend on the
// lease alone: every message of a run is also fenced on the run's chain
// (package publisher), so a holder that does not yet know it lost its lease
// cannot add to the chain once its successor wrote "attached". Ownership is
// decided only by compare-and-set results; whether a holder is gone is read
// from the bucket's leader, since a lagging replica could hide a session.
package lease
