package protocol

// Headers baton sets on the messages it publishes.
const (
	// HeaderMsgID is JetStream's dedupe header: "<runId>:<endOffset>" for a
	// line, "<runId>:<endOffset>:<i>/<n>" for every chunk of a chunked line,
	// and "<runId>:status:<status>:<epoch>:<offset>" for a status.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderOffset is the journal byte offset just past the line (or, on a
	// status, the offset the run had reached). Every message on a run's chain
	// carries it, so a successor can align from whatever message came last.
	HeaderOffset = "Baton-Offset"
	// HeaderChunk is "i/n" on each piece of a line larger than the server's
	// max payload. Pieces are published in order on the same subject.
	HeaderChunk = "Baton-Chunk"
	// HeaderEpoch is the lease epoch of the publisher.
	HeaderEpoch = "Baton-Epoch"
	// HeaderContentType tells a job's encoding: JSON unless it is
	// ContentTypeMsgpack.
	HeaderContentType = "Content-Type"
	// HeaderReason is the reason code of a DLQ entry; HeaderError is its
	// human-readable explanation.
	HeaderReason = "Baton-Reason"
	HeaderError  = "Baton-Error"
	// HeaderOrigSubject and HeaderOrigMsgID describe where a DLQ entry came from.
	HeaderOrigSubject = "Baton-Original-Subject"
	HeaderOrigMsgID   = "Baton-Original-Msg-Id"
	// HeaderRunID, on a DLQ entry, is the rejected job's runId when it
	// has one (PeekRunID): a watcher of that run finds its rejection.
	HeaderRunID = "Baton-Run-Id"
	// HeaderTruncated, on a DLQ entry whose job did not fit the server's
	// max payload beside its headers, is the job's size in bytes: the
	// entry holds its first bytes only. HeaderOrigDigest is then the
	// whole job's "sha256:<hex>".
	HeaderTruncated  = "Baton-Truncated"
	HeaderOrigDigest = "Baton-Original-Digest"
)

// Content types of jobs.
const (
	ContentTypeJSON    = "application/json"
	ContentTypeMsgpack = "application/msgpack"
)
