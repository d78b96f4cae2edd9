package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/batonhq/baton/internal/leader"
)

// Sentinel errors. Every error a Store returns for these conditions matches
// one of them with errors.Is and keeps the JetStream error it came from.
var (
	// ErrNotFound: the key has no value (never written, deleted, purged or
	// expired by the bucket TTL).
	ErrNotFound = errors.New("kv: key not found")
	// ErrExists: Create found a live value under the key.
	ErrExists = errors.New("kv: key exists")
	// ErrConflict: a compare-and-set lost, because the key's revision is not
	// the expected one (R1 streams answer 10071, replicated ones 10164).
	ErrConflict = errors.New("kv: revision conflict")
	// ErrDecode: a stored value is not a msgpack encoding of the record type.
	ErrDecode = errors.New("kv: cannot decode value")
	// ErrUnchanged, returned by a Modify function, leaves the value as it
	// is: Modify writes nothing and returns the value read.
	ErrUnchanged = errors.New("kv: value unchanged")
)

// Modify's retry bounds: conflicts come from concurrent writers or from a
// stale read of a replica, and both clear within a few round trips.
const (
	modifyTries   = 10
	modifyBackoff = 2 * time.Millisecond
)

// Store is a typed view of one KV bucket whose values are msgpack-encoded T.
type Store[T any] struct {
	kv jetstream.KeyValue
}

// Runs, Leases and Nodes are the stores of baton's three buckets.
type (
	Runs   = Store[RunRecord]
	Leases = Store[LeaseRecord]
	Nodes  = Store[NodeRecord]
)

// Entry is one value of a key as read by List or seen by Watch. For a
// delete, purge or TTL-expiry marker, Op says which and Value is zero. Err is
// set (wrapping ErrDecode) when a watched value could not be decoded.
type Entry[T any] struct {
	Key      string
	Value    T
	Revision uint64
	Op       jetstream.KeyValueOp
	Created  time.Time
	Err      error
}

// NewStore wraps an open bucket.
func NewStore[T any](kv jetstream.KeyValue) *Store[T] { return &Store[T]{kv: kv} }

// Open binds to an existing bucket.
func Open[T any](ctx context.Context, js jetstream.JetStream, bucket string) (*Store[T], error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("kv: open bucket %s: %w", bucket, err)
	}
	return NewStore[T](kv), nil
}

// KV returns the underlying bucket.
func (s *Store[T]) KV() jetstream.KeyValue { return s.kv }

// Get returns the value of key and its revision.
func (s *Store[T]) Get(ctx context.Context, key string) (T, uint64, error) {
	var zero T
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return zero, 0, wrapErr(s.kv.Bucket(), "get", key, err)
	}
	v, err := Decode[T](key, e.Revision(), e.Value())
	if err != nil {
		return zero, e.Revision(), err
	}
	return v, e.Revision(), nil
}

// GetFromLeader is Get answered by the leader of the bucket's stream,
// through js's connection. KV reads are direct gets, which a lagging
// replica of a replicated bucket may answer with an older revision; a
// writer that must know whether its own write landed reads here.
func (s *Store[T]) GetFromLeader(ctx context.Context, js jetstream.JetStream, key string) (T, uint64, error) {
	e, err := s.EntryFromLeader(ctx, js, key)
	return e.Value, e.Revision, err
}

// EntryFromLeader is GetFromLeader with the write's time (Created, the
// server's clock). A key whose last message is a delete, a purge or the
// marker a TTL expiry leaves gives ErrNotFound.
func (s *Store[T]) EntryFromLeader(ctx context.Context, js jetstream.JetStream, key string) (Entry[T], error) {
	var zero Entry[T]
	bucket := s.kv.Bucket()
	m, err := leader.Get(ctx, js.Conn(), "KV_"+bucket, 0, "$KV."+bucket+"."+key)
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return zero, fmt.Errorf("kv: get %s/%s: %w", bucket, key, ErrNotFound)
	case errors.As(err, &apiErr):
		return zero, fmt.Errorf("kv: get %s/%s from the leader: %w", bucket, key, err)
	case err != nil:
		return zero, wrapErr(bucket, "get", key, err)
	}
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" || m.Header.Get(jetstream.MarkerReasonHeader) != "" {
		return Entry[T]{Key: key, Revision: m.Sequence}, fmt.Errorf("kv: get %s/%s: %w", bucket, key, ErrNotFound)
	}
	e := Entry[T]{Key: key, Revision: m.Sequence, Op: jetstream.KeyValuePut, Created: m.Time}
	if e.Value, err = Decode[T](key, m.Sequence, m.Data); err != nil {
		return Entry[T]{Key: key, Revision: m.Sequence}, err
	}
	return e, nil
}

// CreateTTL is Create whose write expires after ttl (a per-message TTL;
// the bucket must allow them, see LimitMarkerTTL).
func (s *Store[T]) CreateTTL(ctx context.Context, key string, v T, ttl time.Duration) (uint64, error) {
	b, err := encode(v)
	if err != nil {
		return 0, fmt.Errorf("kv: create %s/%s: %w", s.kv.Bucket(), key, err)
	}
	rev, err := s.kv.Create(ctx, key, b, jetstream.KeyTTL(ttl))
	if err != nil {
		return 0, wrapErr(s.kv.Bucket(), "create", key, err)
	}
	return rev, nil
}

// Create writes v under key only if the key has no live value, and returns
// the new revision; ErrExists otherwise.
func (s *Store[T]) Create(ctx context.Context, key string, v T) (uint64, error) {
	b, err := encode(v)
	if err != nil {
		return 0, fmt.Errorf("kv: create %s/%s: %w", s.kv.Bucket(), key, err)
	}
	rev, err := s.kv.Create(ctx, key, b)
	if err != nil {
		return 0, wrapErr(s.kv.Bucket(), "create", key, err)
	}
	return rev, nil
}

// Update writes v under key only if the key's revision is rev, and returns
// the new revision; ErrConflict otherwise.
func (s *Store[T]) Update(ctx context.Context, key string, v T, rev uint64) (uint64, error) {
	b, err := encode(v)
	if err != nil {
		return 0, fmt.Errorf("kv: update %s/%s: %w", s.kv.Bucket(), key, err)
	}
	n, err := s.kv.Update(ctx, key, b, rev)
	if err != nil {
		return 0, wrapErr(s.kv.Bucket(), "update", key, err)
	}
	return n, nil
}

// Modify reads key, applies fn to its value and writes the result back with
// a compare-and-set, retrying from the read when another writer won (a
// bounded number of times). An error from fn aborts with that error, except
// ErrUnchanged, which returns the value read without writing. It returns
// the value written and its revision.
func (s *Store[T]) Modify(ctx context.Context, key string, fn func(*T) error) (T, uint64, error) {
	return s.modify(ctx, key, fn, s.Update)
}

// ModifyTTL is Modify whose write expires after ttl (a per-message TTL,
// published through js; the bucket must allow them, see LimitMarkerTTL). A
// later write without a TTL makes the value permanent again.
func (s *Store[T]) ModifyTTL(ctx context.Context, js jetstream.JetStream, key string, ttl time.Duration, fn func(*T) error) (T, uint64, error) {
	return s.modify(ctx, key, fn, func(ctx context.Context, key string, v T, rev uint64) (uint64, error) {
		return s.UpdateTTL(ctx, js, key, v, rev, ttl)
	})
}

// UpdateTTL is Update whose write expires after ttl (see ModifyTTL).
func (s *Store[T]) UpdateTTL(ctx context.Context, js jetstream.JetStream, key string, v T, rev uint64, ttl time.Duration) (uint64, error) {
	b, err := encode(v)
	if err != nil {
		return 0, fmt.Errorf("kv: update %s/%s: %w", s.kv.Bucket(), key, err)
	}
	ack, err := js.Publish(ctx, "$KV."+s.kv.Bucket()+"."+key, b,
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
	if err != nil {
		return 0, wrapErr(s.kv.Bucket(), "update", key, err)
	}
	return ack.Sequence, nil
}

func (s *Store[T]) modify(ctx context.Context, key string, fn func(*T) error,
	update func(ctx context.Context, key string, v T, rev uint64) (uint64, error)) (T, uint64, error) {
	var zero T
	var err error
	for try := range modifyTries {
		if try > 0 {
			// Jittered, growing pause so racing writers spread out.
			d := modifyBackoff*time.Duration(try) + rand.N(modifyBackoff)
			select {
			case <-ctx.Done():
				return zero, 0, fmt.Errorf("kv: modify %s/%s: %w (after %w)", s.kv.Bucket(), key, ctx.Err(), err)
			case <-time.After(d):
			}
		}
		var v T
		var rev uint64
		v, rev, err = s.Get(ctx, key)
		if err != nil {
			return zero, 0, err
		}
		if err = fn(&v); errors.Is(err, ErrUnchanged) {
			return v, rev, nil
		} else if err != nil {
			return zero, 0, err
		}
		var n uint64
		n, err = update(ctx, key, v, rev)
		if err == nil {
			return v, n, nil
		}
		if !errors.Is(err, ErrConflict) {
			return zero, 0, err
		}
	}
	return zero, 0, fmt.Errorf("kv: modify %s/%s: gave up after %d tries: %w", s.kv.Bucket(), key, modifyTries, err)
}

// Delete places a delete marker on key, only if its revision is rev; rev 0
// deletes unconditionally.
func (s *Store[T]) Delete(ctx context.Context, key string, rev uint64) error {
	var opts []jetstream.KVDeleteOpt
	if rev > 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	if err := s.kv.Delete(ctx, key, opts...); err != nil {
		return wrapErr(s.kv.Bucket(), "delete", key, err)
	}
	return nil
}

// Purge removes key's values with a purge marker that itself expires
// after markerTTL (so a bucket without MaxAge keeps no marker per key
// ever), only if its revision is rev; rev 0 purges unconditionally.
// Watchers see the marker as a purge.
func (s *Store[T]) Purge(ctx context.Context, key string, rev uint64, markerTTL time.Duration) error {
	opts := []jetstream.KVDeleteOpt{jetstream.PurgeTTL(markerTTL)}
	if rev > 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	if err := s.kv.Purge(ctx, key, opts...); err != nil {
		return wrapErr(s.kv.Bucket(), "purge", key, err)
	}
	return nil
}

// Keys returns the keys that have a live value; an empty bucket gives an
// empty slice.
func (s *Store[T]) Keys(ctx context.Context) ([]string, error) {
	keys, err := s.kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return []string{}, nil
	}
	if err != nil {
		return nil, wrapErr(s.kv.Bucket(), "keys", "*", err)
	}
	return keys, nil
}

// List returns every live value. Values that cannot be decoded are left out
// of the map and reported together in the error, which then comes with the
// rest of the map rather than instead of it.
func (s *Store[T]) List(ctx context.Context) (map[string]Entry[T], error) {
	return s.ListMatching(ctx, ">")
}

// ListMatching is List of the keys that match filter (wildcards * and >).
func (s *Store[T]) ListMatching(ctx context.Context, filter string) (map[string]Entry[T], error) {
	w, err := s.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, wrapErr(s.kv.Bucket(), "list", filter, err)
	}
	defer w.Stop()
	out := map[string]Entry[T]{}
	var bad []error
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kv: list %s: %w", s.kv.Bucket(), ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("kv: list %s: watcher stopped", s.kv.Bucket())
			}
			if e == nil { // end of the current values
				return out, errors.Join(bad...)
			}
			ent := toEntry[T](e)
			if ent.Err != nil {
				bad = append(bad, ent.Err)
				continue
			}
			out[ent.Key] = ent
		}
	}
}

// Watch streams the values of key (which may hold the wildcards * and >):
// first the current value of each matching key, then every change,
// including delete, purge and TTL-expiry markers with Op set. The channel
// closes when ctx ends.
func (s *Store[T]) Watch(ctx context.Context, key string) (<-chan Entry[T], error) {
	return s.WatchWith(ctx, key)
}

// WatchWith is Watch with JetStream watch options (UpdatesOnly,
// IncludeHistory, ResumeFromRevision...).
func (s *Store[T]) WatchWith(ctx context.Context, key string, opts ...jetstream.WatchOpt) (<-chan Entry[T], error) {
	w, err := s.kv.Watch(ctx, key, opts...)
	if err != nil {
		return nil, wrapErr(s.kv.Bucket(), "watch", key, err)
	}
	return s.relay(ctx, w), nil
}

// WatchFiltered is WatchWith over several keys or key filters at once, in
// one consumer.
func (s *Store[T]) WatchFiltered(ctx context.Context, keys []string, opts ...jetstream.WatchOpt) (<-chan Entry[T], error) {
	w, err := s.kv.WatchFiltered(ctx, keys, opts...)
	if err != nil {
		return nil, wrapErr(s.kv.Bucket(), "watch", strings.Join(keys, ","), err)
	}
	return s.relay(ctx, w), nil
}

// relay turns w's updates into entries until ctx ends.
func (s *Store[T]) relay(ctx context.Context, w jetstream.KeyWatcher) <-chan Entry[T] {
	out := make(chan Entry[T], 64)
	go func() {
		defer close(out)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil { // end of the current values: nothing to report
					continue
				}
				select {
				case out <- toEntry[T](e):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

func toEntry[T any](e jetstream.KeyValueEntry) Entry[T] {
	ent := Entry[T]{Key: e.Key(), Revision: e.Revision(), Op: e.Operation(), Created: e.Created()}
	if e.Operation() == jetstream.KeyValuePut {
		ent.Value, ent.Err = Decode[T](e.Key(), e.Revision(), e.Value())
	}
	return ent
}

// Decode decodes a stored value of key at rev. Anything but exactly one
// msgpack value of T's shape is an error wrapping ErrDecode.
func Decode[T any](key string, rev uint64, b []byte) (T, error) {
	var v T
	if len(b) == 0 {
		return v, fmt.Errorf("%w: key %q revision %d: empty value", ErrDecode, key, rev)
	}
	if b[0] == msgpackNil {
		return v, fmt.Errorf("%w: key %q revision %d: nil value", ErrDecode, key, rev)
	}
	r := bytes.NewReader(b)
	if err := msgpack.NewDecoder(r).Decode(&v); err != nil {
		var zero T
		return zero, fmt.Errorf("%w: key %q revision %d: %w", ErrDecode, key, rev, err)
	}
	if r.Len() != 0 {
		var zero T
		return zero, fmt.Errorf("%w: key %q revision %d: %d trailing bytes", ErrDecode, key, rev, r.Len())
	}
	return v, nil
}

// msgpackNil would decode to a zero record without complaint.
const msgpackNil = 0xc0

func encode[T any](v T) ([]byte, error) { return msgpack.Marshal(v) }

// wrap maps a JetStream error to the store's sentinels. The mapping depends
// on the operation: the "wrong last sequence" code means "exists" to Create
// and "conflict" to Update and Delete.
func wrapErr(bucket, op, key string, err error) error {
	var sentinel error
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		sentinel = ErrNotFound
	case op == "create" && errors.Is(err, jetstream.ErrKeyExists):
		sentinel = ErrExists
	case op != "create" && (errors.Is(err, jetstream.ErrKeyRevisionMismatch) || wrongLastSeq(err)):
		sentinel = ErrConflict
	}
	if sentinel == nil {
		return fmt.Errorf("kv: %s %s/%s: %w", op, bucket, key, err)
	}
	return fmt.Errorf("kv: %s %s/%s: %w: %w", op, bucket, key, sentinel, err)
}

// wrongLastSeq reports whether err carries the server's "wrong last
// sequence" code: 10071, or 10164 from replicated streams.
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// ReadAll returns every live value of bucket like List, through a filtered
// pull consumer of the bucket's stream: what a NATS user that may only read
// the bucket (no consumer deletes, no push consumers) can do. Values that
// cannot be decoded are left out and reported together in the error, which
// then comes with the rest of the map.
func ReadAll[T any](ctx context.Context, js jetstream.JetStream, bucket string) (map[string]Entry[T], error) {
	prefix := "$KV." + bucket + "."
	cons, err := js.OrderedConsumer(ctx, "KV_"+bucket, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + ">"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return nil, wrapErr(bucket, "list", "*", err)
	}
	out := map[string]Entry[T]{}
	info := cons.CachedInfo()
	if info == nil || info.NumPending == 0 {
		return out, nil
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, wrapErr(bucket, "list", "*", err)
	}
	defer it.Stop()
	var bad []error
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("kv: list %s: %w", bucket, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, fmt.Errorf("kv: list %s: %w", bucket, err)
		}
		key := strings.TrimPrefix(msg.Subject(), prefix)
		if op := msg.Headers().Get("KV-Operation"); op == "" {
			ent := Entry[T]{Key: key, Revision: md.Sequence.Stream, Op: jetstream.KeyValuePut, Created: md.Timestamp}
			ent.Value, ent.Err = Decode[T](key, md.Sequence.Stream, msg.Data())
			if ent.Err != nil {
				bad = append(bad, ent.Err)
			} else {
				out[key] = ent
			}
		}
		if md.NumPending == 0 {
			return out, errors.Join(bad...)
		}
	}
}
