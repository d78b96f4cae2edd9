// Package publisher owns a run's fenced chain: the sequence of messages on
// <prefix>.runs.<runId>.{events,raw,status} in the events stream, and the
// rule that only one publisher at a time can extend it.
//
// Every publish expects, for the filter <prefix>.runs.<runId>.>, the stream
// sequence of the chain's own previous publish
// (Nats-Expected-Last-Subject-Sequence). A successor that aligns on the
// chain's last message (Align) and writes one message fences every older
// publisher: their next publish is refused by the server and they get
// ErrFenced (invariant I1). Every message carries a Nats-Msg-Id derived from
// the run and the journal offset, so a retry after a lost ack never stores a
// line twice (I2): replicated streams answer such a retry with a duplicate
// ack, single servers with "wrong last sequence", which the chain tells
// apart from fencing by reading the chain's last message. A message counts
// as the chain's own only if its Msg-Id and its Baton-Epoch both match:
// two holders publishing the same journal line share the Msg-Id, and only
// the epoch (WithEpoch, the lease epoch) keeps an old holder from adopting
// its successor's message and extending the chain from there.
//
// A chain keeps one publish in flight and never refreshes its expected
// sequence from the server in its normal path; only Align, run by a new
// lease holder, reads where the chain stands.
//
// PublishLines sends a run's backlog as atomic batches (ADR-50, server
// 2.12.1 and later, AllowAtomicPublish on the stream): the batch's first
// message carries the expectation, every message its own Msg-Id, and the
// server stores all of it or none. A batch counts as one publish in flight;
// a retried batch whose first attempt was stored is refused as a duplicate
// and recognised by the chain's last message, and a zombie's batch is
// refused whole. A server that drops batches because it is busy gets
// smaller ones, then one message at a time; attempts that time out wait
// longer each time. Nothing is buffered: a call returns once its lines are
// on the chain, which is the backpressure on the journal follower.
//
// On an events stream of one replica (WithFastBatches, server 2.14 and
// later, AllowBatchPublish on the stream) a chain that published a status
// sends its backlog as fast batches instead, which the server stores as
// they come without staging them: the first message expects the chain's
// tip on the filter, every other one that the run's status subject still
// ends at the chain's own last status, which a successor's first publish
// (always a status) moves; the server stores none after a message that
// is missing or refused. Anything but the whole batch acknowledged is
// settled by the atomic path (fast.go).
package publisher
