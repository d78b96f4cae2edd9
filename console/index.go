package console

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/kv"
)

// runIndex keeps every run record in memory, fed by one ordered consumer
// of the runs bucket's stream that reads the last value of each key, then
// follows every change. A list request then filters and pages in memory:
// no request reads the bucket, however many records it holds.
type runIndex struct {
	mu      sync.Mutex
	runs    map[string]indexed
	ready   bool   // the bucket's current values have all been read
	err     string // why the index is not ready, for a person
	version uint64 // bumped on every change
	subs    map[chan struct{}]struct{}
}

// indexed is a record as the index keeps it: without its job (up to
// protocol.MaxKeptJob each; a re-run reads it from the bucket), knowing
// whether it kept one.
type indexed struct {
	kv.RunRecord
	keptJob bool
}

func index(rec kv.RunRecord) indexed {
	kept := len(rec.Job) > 0
	rec.Job = nil
	return indexed{RunRecord: rec, keptJob: kept}
}

func newRunIndex() *runIndex {
	return &runIndex{runs: map[string]indexed{}, subs: map[chan struct{}]struct{}{}, err: "reading run records"}
}

// follow reads the bucket until ctx ends, starting over (after a pause)
// whenever the consumer fails, for example before the bucket exists.
func (x *runIndex) follow(ctx context.Context, js jetstream.JetStream, bucket string) {
	for ctx.Err() == nil {
		err := x.followOnce(ctx, js, bucket)
		if ctx.Err() != nil {
			return
		}
		x.mu.Lock()
		x.err = "run records: " + err.Error()
		x.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (x *runIndex) followOnce(ctx context.Context, js jetstream.JetStream, bucket string) error {
	prefix := "$KV." + bucket + "."
	// A filtered ordered consumer: what a NATS user that may only read
	// the bucket can create (deploy/nats-auth.conf, user client).
	cons, err := js.OrderedConsumer(ctx, "KV_"+bucket, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + ">"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return err
	}
	fresh := map[string]indexed{}
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		x.swap(fresh)
		fresh = nil
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	defer context.AfterFunc(ctx, it.Stop)()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			return err
		}
		key := strings.TrimPrefix(msg.Subject(), prefix)
		var rec *kv.RunRecord
		if msg.Headers().Get("KV-Operation") == "" {
			if r, err := kv.Decode[kv.RunRecord](key, md.Sequence.Stream, msg.Data()); err == nil {
				rec = &r
			}
		}
		if fresh != nil { // still reading the current values
			if rec != nil {
				fresh[key] = index(*rec)
			} else {
				delete(fresh, key)
			}
			if md.NumPending == 0 {
				x.swap(fresh)
				fresh = nil
			}
			continue
		}
		x.put(key, rec)
	}
}

// swap installs a full read of the bucket.
func (x *runIndex) swap(all map[string]indexed) {
	x.mu.Lock()
	x.runs, x.ready, x.err = all, true, ""
	x.changedLocked()
	x.mu.Unlock()
}

// put records one change; a nil record is a delete.
func (x *runIndex) put(key string, rec *kv.RunRecord) {
	x.mu.Lock()
	if rec == nil {
		delete(x.runs, key)
	} else {
		x.runs[key] = index(*rec)
	}
	x.changedLocked()
	x.mu.Unlock()
}

func (x *runIndex) changedLocked() {
	x.version++
	for ch := range x.subs {
		select {
		case ch <- struct{}{}:
		default: // a change is already pending for it
		}
	}
}

// subscribe returns a channel that gets a value after each change (changes
// coalesce), and its cancel.
func (x *runIndex) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	x.mu.Lock()
	x.subs[ch] = struct{}{}
	x.mu.Unlock()
	return ch, func() {
		x.mu.Lock()
		delete(x.subs, ch)
		x.mu.Unlock()
	}
}

// runFilter selects runs for the list page.
type runFilter struct {
	State   string // a run state, or "active" (not terminal), or "" for all
	Profile string
	Node    string
	Label   string // "key" or "key=value"
	Query   string // a substring of the runId
}

func (f runFilter) match(r *kv.RunRecord) bool {
	switch {
	case f.State == "active" && r.State.Terminal(),
		f.State != "" && f.State != "active" && string(r.State) != f.State,
		f.Profile != "" && r.Profile != f.Profile,
		f.Node != "" && r.Node != f.Node,
		f.Query != "" && !strings.Contains(r.RunID, f.Query):
		return false
	}
	if f.Label != "" {
		k, v, hasValue := strings.Cut(f.Label, "=")
		got, ok := r.Labels[k]
		if !ok || hasValue && got != v {
			return false
		}
	}
	return true
}

// page is one page of the list, newest first.
type page struct {
	Runs     []client.RunView `json:"runs"`
	Total    int              `json:"total"`   // records matching the filter
	All      int              `json:"all"`     // records in the bucket
	Offset   int              `json:"offset"`  // of the first run of this page
	Version  uint64           `json:"version"` // of the index this page was cut from
	Ready    bool             `json:"ready"`
	Error    string           `json:"error,omitempty"`
	Profiles []string         `json:"profiles"` // every profile and node seen, for the filters
	Nodes    []string         `json:"nodes"`
	// States counts the records of each state that match the filter but
	// for its state: what each state's choice would list.
	States map[string]int `json:"states"`
}

// list filters, sorts (newest first, then runId) and cuts a page.
func (x *runIndex) list(f runFilter, offset, limit int) page {
	x.mu.Lock()
	matched := make([]*kv.RunRecord, 0, min(len(x.runs), 1024))
	profiles, nodes, states := map[string]bool{}, map[string]bool{}, map[string]int{}
	anyState := f
	anyState.State = ""
	for _, r := range x.runs {
		profiles[r.Profile], nodes[r.Node] = true, true
		if !anyState.match(&r.RunRecord) {
			continue
		}
		states[string(r.State)]++
		if f.match(&r.RunRecord) {
			matched = append(matched, &r.RunRecord)
		}
	}
	p := page{Total: len(matched), All: len(x.runs), Version: x.version, Ready: x.ready, Error: x.err, States: states}
	x.mu.Unlock()
	slices.SortFunc(matched, func(a, b *kv.RunRecord) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.RunID, b.RunID)
	})
	offset = max(0, min(offset, len(matched)))
	end := min(len(matched), offset+limit)
	p.Offset = offset
	p.Runs = make([]client.RunView, 0, end-offset)
	for _, r := range matched[offset:end] {
		p.Runs = append(p.Runs, client.NewRunView(*r))
	}
	p.Profiles, p.Nodes = nonEmptyKeys(profiles), nonEmptyKeys(nodes)
	return p
}

func nonEmptyKeys(m map[string]bool) []string {
	// [], not null, with no runs: the page's filters iterate over it.
	return slices.DeleteFunc(append([]string{}, slices.Sorted(maps.Keys(m))...), func(k string) bool { return k == "" })
}

// get returns one record from the index.
func (x *runIndex) get(runID string) (indexed, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	r, ok := x.runs[runID]
	return r, ok
}
