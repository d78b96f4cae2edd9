// Package kv is baton's typed view of its JetStream key-value buckets: run
// records, leases and node heartbeats, stored as msgpack. It owns encoding,
// decoding (with clear errors for values it cannot read) and the
// compare-and-set primitives the lease and worker packages build on.
package kv
