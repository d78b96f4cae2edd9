// Package leader reads a stream's message from the stream's leader. A
// stream that allows direct gets (the events stream, for the read relay;
// every KV bucket) is read by nats.go with a direct get, which any replica
// may answer, a lagging one included; a writer that must see the true last
// message (the publisher aligning a chain, a lease holder checking its
// write) reads here instead.
package leader
