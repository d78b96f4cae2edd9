// Package provision creates baton's streams and KV buckets, idempotently,
// at worker start (and in tests). Existing resources are updated to the
// wanted configuration where JetStream allows it.
package provision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

// Options size the resources.
type Options struct {
	Replicas     int           // default 1
	LeaseTTL     time.Duration // default 15s
	EventsMaxAge time.Duration // default 7 days
	// RecordTTL is how long a finished run's record is kept (default
	// EventsMaxAge): the terminal write carries it as a per-message TTL,
	// so the runs bucket allows those.
	RecordTTL time.Duration
	NodeTTL   time.Duration // default 3 × LeaseTTL
	// OutputsMaxAge is the outputs bucket's TTL (default 7 days).
	OutputsMaxAge time.Duration
	// WorkspacesMaxAge is the workspaces stream's max age (default 7 days).
	WorkspacesMaxAge time.Duration
	// WorkspacesMaxBytes bounds the workspaces stream, which clients
	// append to (0: none); reserved in the server's or account's store,
	// and a full stream refuses new uploads, so they never take room
	// another stream needs.
	WorkspacesMaxBytes int64
	// CheckpointsMaxBytes bounds the checkpoints bucket (0: none);
	// reserved as WorkspacesMaxBytes is.
	CheckpointsMaxBytes int64
	// MaxJobBytes bounds one job; the jobs stream refuses larger ones, so the
	// bound is stated once, by the server.
	MaxJobBytes int32
	// Stream bounds; 0 is none. The events and jobs streams refuse what
	// would exceed theirs (publishers wait, or get the error); the DLQ
	// drops its oldest entries.
	EventsMaxBytes            int64
	JobsMaxBytes, JobsMaxMsgs int64
	DLQMaxBytes, DLQMaxMsgs   int64
}

// limit is n as a JetStream stream limit, where -1 is none.
func limit(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

func (o *Options) defaults() {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 15 * time.Second
	}
	if o.EventsMaxAge <= 0 {
		o.EventsMaxAge = 7 * 24 * time.Hour
	}
	if o.RecordTTL <= 0 {
		o.RecordTTL = o.EventsMaxAge
	}
	if o.OutputsMaxAge <= 0 {
		o.OutputsMaxAge = 7 * 24 * time.Hour
	}
	if o.WorkspacesMaxAge <= 0 {
		o.WorkspacesMaxAge = 7 * 24 * time.Hour
	}
	if o.NodeTTL <= 0 {
		o.NodeTTL = 3 * o.LeaseTTL
	}
}

// Resources are handles on what Ensure provisioned.
type Resources struct {
	Jobs, Events, DLQ jetstream.Stream
	Input             jetstream.Stream
	Runs, Leases      jetstream.KeyValue
	Nodes             jetstream.KeyValue
	NodeRuns          jetstream.KeyValue
	// Outputs is the Object Store bucket of captured run outputs.
	Outputs jetstream.ObjectStore
	// Sessions and Checkpoints are the session records and their
	// checkpoints (packages session and checkpoint).
	Sessions    jetstream.KeyValue
	Checkpoints jetstream.ObjectStore
	// Approvals are runs' permission prompts and their answers.
	Approvals jetstream.KeyValue
	// Slots are the concurrency keys' slots across the cluster.
	Slots jetstream.KeyValue
	// Workspaces is the stream of archives jobs seed their workspaces
	// from (package wsarchive reads them).
	Workspaces jetstream.Stream
	// LegacyWorkspaces is set when the Object Store bucket an older
	// baton kept archives in is still there: no longer read, and left
	// for an operator to delete.
	LegacyWorkspaces string
}

// Ensure creates or updates every stream and bucket named by n.
func Ensure(ctx context.Context, js jetstream.JetStream, n protocol.Names, o Options) (*Resources, error) {
	o.defaults()
	var r Resources
	var err error
	if r.Jobs, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        n.JobsStream(),
		Description: "baton run and attach jobs",
		Subjects:    n.JobsSubjects(),
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		Duplicates:  2 * time.Minute,
		MaxBytes:    limit(o.JobsMaxBytes),
		MaxMsgs:     limit(o.JobsMaxMsgs),
		Discard:     jetstream.DiscardNew,
	}); err != nil {
		return nil, err
	}
	if r.Events, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        n.EventsStream(),
		Description: "baton run events, raw lines and statuses: one fenced chain per run",
		Subjects:    n.IngestSubjects(),
		// Stored under the runs subjects readers filter on, and republished
		// there once stored, so live subscribers see the chain, not the
		// publishes (see protocol.Names.IngestSubjects).
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      n.IngestSubjects()[0],
			Destination: n.Prefix() + ".runs.{{wildcard(1)}}.{{wildcard(2)}}",
		},
		RePublish: &jetstream.RePublish{Source: n.RunsSubjects(), Destination: n.RunsSubjects()},
		Retention: jetstream.LimitsPolicy,
		Storage:   jetstream.FileStorage,
		Replicas:  o.Replicas,
		MaxAge:    o.EventsMaxAge,
		MaxBytes:  limit(o.EventsMaxBytes),
		// Full, it refuses new events rather than evict the oldest: a
		// live run's chain is never cut from under it (its next publish
		// would be fenced), publishing waits for room and loses nothing,
		// and finished runs stay replayable until they age out.
		Discard:    jetstream.DiscardNew,
		Duplicates: 2 * time.Minute,
		// Direct gets serve the workers' read relay (worker/read.go),
		// whose readers page again on a gap; a successor aligns from the
		// chain's last message read from the leader (publisher.leaderGet),
		// never by direct get, which a lagging replica may answer.
		AllowDirect:        true,
		AllowAtomicPublish: true,
		// Fast batches: what a run's backlog goes out as on a stream of
		// one replica (publisher.WithFastBatches).
		AllowBatchPublish: true,
	}); err != nil {
		return nil, err
	}
	if r.Input, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        n.InputStream(),
		Description: "baton input messages accepted for running agents, until their runner wrote them",
		Subjects:    []string{n.InputStoreSubjects()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		// As long as a run's events: a run waits for input no longer.
		MaxAge:     o.EventsMaxAge,
		Discard:    jetstream.DiscardNew,
		Duplicates: 2 * time.Minute,
		// The holder reads a run's next message from the leader: a
		// lagging replica could hide one.
		AllowDirect: false,
	}); err != nil {
		return nil, err
	}
	if r.DLQ, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        n.DLQStream(),
		Description: "baton jobs rejected, with the reason in headers",
		Subjects:    n.DLQSubjects(),
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		MaxAge:      30 * 24 * time.Hour,
		MaxBytes:    limit(o.DLQMaxBytes),
		MaxMsgs:     limit(o.DLQMaxMsgs),
		Discard:     jetstream.DiscardOld,
		// Read through the workers' relay, by direct get.
		AllowDirect: true,
	}); err != nil {
		return nil, err
	}
	if r.Runs, err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      n.RunsBucket(),
		Description: "baton run records (msgpack); a finished run's expires after the record retention",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		// Turns on per-message TTLs, which the terminal write uses; the
		// marker an expiry leaves is short-lived.
		LimitMarkerTTL: time.Minute,
	}); err != nil {
		return nil, err
	}
	if r.Leases, err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      n.LeasesBucket(),
		Description: "baton run leases and worker liveness keys (msgpack); a liveness key expires after the lease TTL",
		History:     1,
		// No bucket TTL: a run's lease is written only when taken, handed
		// off or ended, and lives as long as its holder's liveness key
		// (package lease), which carries a per-message TTL; its expiry
		// leaves a marker watchers see. Setting this on a bucket of the
		// older design (TTL = lease TTL) is its migration.
		TTL:            0,
		LimitMarkerTTL: max(time.Minute, o.LeaseTTL),
		Storage:        jetstream.FileStorage,
		Replicas:       o.Replicas,
	}); err != nil {
		return nil, err
	}
	if r.NodeRuns, err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      n.NodeRunsBucket(),
		Description: "baton unfinished runs by node: <node>.<runId>, from start to end",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		// An entry is removed with a purge whose marker expires, so the
		// bucket holds only live runs, not a marker per run ever.
		LimitMarkerTTL: time.Minute,
	}); err != nil {
		return nil, err
	}
	if r.Nodes, err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      n.NodesBucket(),
		Description: "baton node heartbeats (msgpack)",
		History:     1,
		TTL:         o.NodeTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}); err != nil {
		return nil, err
	}
	if r.Outputs, err = ensureObjectStore(ctx, js, jetstream.ObjectStoreConfig{
		Bucket:      n.OutputsBucket(),
		Description: "baton run outputs: <runId>/diff.patch and <runId>/files/<path>; bucket TTL is outputsMaxAge",
		TTL:         o.OutputsMaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}); err != nil {
		return nil, err
	}
	if r.Sessions, err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      n.SessionsBucket(),
		Description: "baton session records (msgpack): live run, runs, checkpoints kept; a worker deletes one unused for sessionsMaxAge",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}); err != nil {
		return nil, err
	}
	if r.Approvals, err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      n.ApprovalsBucket(),
		Description: "baton approvals: <runId>.<id>, a run's permission prompt, its policy verdict and who answered it (msgpack); kept as long as runs' events",
		History:     1,
		TTL:         o.EventsMaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}); err != nil {
		return nil, err
	}
	if r.Slots, err = ensureKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      n.SlotsBucket(),
		Description: "baton concurrency keys' slots: <key>.<n>, n below the key's limit, naming the run that holds it (JSON); deleted when the run ends",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}); err != nil {
		return nil, err
	}
	if r.Checkpoints, err = ensureObjectStore(ctx, js, jetstream.ObjectStoreConfig{
		Bucket:      n.CheckpointsBucket(),
		Description: "baton sessions' checkpoints: <session>/<runId> (a tar of workspace/ and home/) and its manifest; no TTL: a checkpoint lives while a session keeps it",
		MaxBytes:    limit(o.CheckpointsMaxBytes),
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		// Workspaces are mostly text: s2 in the server costs little CPU.
		Compression: true,
	}); err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeInsufficientResources || apiErr.ErrorCode == errCodeStorageExceeded) {
			err = fmt.Errorf("%w (checkpointsMaxBytes is reserved in the server's max_file_store, or the account's max_file: lower it, or raise those)", err)
		}
		return nil, err
	}
	if r.Workspaces, err = ensureStream(ctx, js, workspacesConfig(n, o)); err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeInsufficientResources || apiErr.ErrorCode == errCodeStorageExceeded) {
			err = fmt.Errorf("%w (workspacesMaxBytes is reserved in the server's max_file_store, or the account's max_file: lower it, or raise those)", err)
		}
		return nil, err
	}
	legacy := "OBJ_" + n.WorkspacesStream()
	if _, err := js.Stream(ctx, legacy); err == nil {
		r.LegacyWorkspaces = legacy
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("look up stream %s: %w", legacy, err)
	}
	return &r, nil
}

// JetStream's answers to a stream whose MaxBytes the store cannot reserve.
const (
	errCodeInsufficientResources jetstream.ErrorCode = 10023
	errCodeStorageExceeded       jetstream.ErrorCode = 10047
)

// workspacesConfig is the workspaces stream: clients may only append to
// it (their permissions name its subjects and nothing of its API), and
// the stream itself refuses whatever would change what is stored: a
// second message on a subject (so a chunk or a size record is never
// replaced), rollups, deletes and purges (which no update can allow
// again). It is bounded in bytes, reserved, discarding new uploads when
// full, and in message size (a chunk and its headers).
func workspacesConfig(n protocol.Names, o Options) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:                 n.WorkspacesStream(),
		Description:          "baton workspace archives (tar or tar.gz) jobs seed their workspaces from, by their SHA-256: chunks, then the size; append only, max age workspacesMaxAge",
		Subjects:             []string{n.WorkspacesSubjects()},
		Retention:            jetstream.LimitsPolicy,
		Storage:              jetstream.FileStorage,
		Replicas:             o.Replicas,
		MaxAge:               o.WorkspacesMaxAge,
		MaxBytes:             limit(o.WorkspacesMaxBytes),
		Discard:              jetstream.DiscardNew,
		MaxMsgsPerSubject:    1,
		DiscardNewPerSubject: true,
		MaxMsgSize:           protocol.WorkspaceChunkBytes + 4096,
		AllowRollup:          false,
		DenyDelete:           true,
		DenyPurge:            true,
		// Chunks are read by direct gets (raw, ten times faster than
		// message gets' base64 JSON); a replica that lags may answer one
		// as missing, which wsarchive asks again.
		AllowDirect: true,
	}
}

func ensureObjectStore(ctx context.Context, js jetstream.JetStream, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	obs, err := js.CreateOrUpdateObjectStore(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("provision object store %s: %w", cfg.Bucket, err)
	}
	return obs, nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("provision stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

func ensureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("provision bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}
