package provision_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
)

func TestEnsureIsIdempotent(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := protocol.MustNames("")
	for i := range 2 {
		r, err := provision.Ensure(ctx, js, n, provision.Options{LeaseTTL: 3 * time.Second})
		if err != nil {
			t.Fatalf("ensure #%d: %v", i, err)
		}
		info, err := r.Events.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Config.AllowAtomicPublish || !info.Config.AllowDirect {
			t.Fatalf("events stream: atomic=%v direct=%v", info.Config.AllowAtomicPublish, info.Config.AllowDirect)
		}
		checkRepublish(t, info.Config)
		checkLeases(t, ctx, r.Leases, 3*time.Second)
	}
}

// TestEnsureAllowsDirectReads: the read relay pages the events stream and
// the DLQ by direct get, so an existing deployment's streams (made with
// AllowDirect false) are updated in place.
func TestEnsureAllowsDirectReads(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, n, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{n.EventsStream(), n.DLQStream()} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		cfg.AllowDirect = false
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	r, err := provision.Ensure(ctx, js, n, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []jetstream.Stream{r.Events, r.DLQ} {
		if info := st.CachedInfo(); !info.Config.AllowDirect {
			t.Fatalf("stream %s: AllowDirect still false after Ensure", info.Config.Name)
		}
	}
}

// checkLeases: the leases bucket has no TTL of its own (a run's lease is
// not renewed) and allows the liveness keys' per-message TTLs, whose
// expiry leaves a marker.
func checkLeases(t *testing.T, ctx context.Context, b jetstream.KeyValue, leaseTTL time.Duration) {
	t.Helper()
	st, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	if st.TTL() != 0 || !cfg.AllowMsgTTL || cfg.SubjectDeleteMarkerTTL < leaseTTL {
		t.Fatalf("leases bucket: TTL %v, per-message TTLs %v, marker TTL %v", st.TTL(), cfg.AllowMsgTTL, cfg.SubjectDeleteMarkerTTL)
	}
}

// TestEnsureMigratesLeases: a leases bucket of the design that renewed
// every lease (bucket TTL = lease TTL) loses its TTL in place and keeps
// its leases.
func TestEnsureMigratesLeases(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := protocol.MustNames("")
	old, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.LeasesBucket(), History: 1, TTL: 3 * time.Second, LimitMarkerTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, "r1", []byte{0x80}); err != nil {
		t.Fatal(err)
	}
	r, err := provision.Ensure(ctx, js, n, provision.Options{LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatalf("ensure over an old leases bucket: %v", err)
	}
	checkLeases(t, ctx, r.Leases, 3*time.Second)
	if e, err := r.Leases.Get(ctx, "r1"); err != nil || e.Revision() != 1 {
		t.Fatalf("lease kept through the migration: %v, %v", e, err)
	}
}

// checkRepublish: the events stream takes the ingest subjects, stores them
// as the runs subjects and republishes them there.
func checkRepublish(t *testing.T, cfg jetstream.StreamConfig) {
	t.Helper()
	n := protocol.MustNames("")
	if !slices.Equal(cfg.Subjects, n.IngestSubjects()) || cfg.SubjectTransform == nil ||
		cfg.RePublish == nil || cfg.RePublish.Destination != n.RunsSubjects() {
		t.Fatalf("events stream subjects %v, transform %+v, republish %+v", cfg.Subjects, cfg.SubjectTransform, cfg.RePublish)
	}
}

// TestEnsureMigratesEvents: a stream provisioned before the ingest
// subjects (stored and published on the runs subjects) is updated in place
// and keeps its messages under the subjects readers filter on.
func TestEnsureMigratesEvents(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := protocol.MustNames("")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: n.EventsStream(), Subjects: []string{"baton.runs.*.*"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, n.EventsSubject("old"), []byte(`{"old":true}`)); err != nil {
		t.Fatal(err)
	}
	r, err := provision.Ensure(ctx, js, n, provision.Options{LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Events.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkRepublish(t, info.Config)
	if _, err := js.Publish(ctx, n.IngestSubject("new", protocol.KindEvents), []byte(`{"new":true}`)); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"old", "new"} {
		m, err := r.Events.GetLastMsgForSubject(ctx, n.RunFilter(run))
		if err != nil || m.Subject != n.EventsSubject(run) {
			t.Fatalf("run %s: last message %v, %v", run, m, err)
		}
	}
}

// TestEnsureMigratesRuns: a runs bucket made before record retention gets
// per-message TTLs in place, keeping its records, and the node index
// appears.
func TestEnsureMigratesRuns(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := protocol.MustNames("")
	old, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.RunsBucket(), History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, "r1", []byte{0x80}); err != nil {
		t.Fatal(err)
	}
	r, err := provision.Ensure(ctx, js, n, provision.Options{})
	if err != nil {
		t.Fatalf("ensure over an old runs bucket: %v", err)
	}
	st, err := js.Stream(ctx, "KV_"+n.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if cfg := st.CachedInfo().Config; !cfg.AllowMsgTTL || cfg.SubjectDeleteMarkerTTL <= 0 {
		t.Fatalf("runs bucket after ensure: AllowMsgTTL %v, marker TTL %v", cfg.AllowMsgTTL, cfg.SubjectDeleteMarkerTTL)
	}
	if _, err := r.Runs.Get(ctx, "r1"); err != nil {
		t.Fatalf("record after the migration: %v", err)
	}
	if r.NodeRuns == nil {
		t.Fatal("no node index bucket")
	}
}

// TestEnsureStreamBounds: the streams get their bounds and discard
// policies, none by default, and a second Ensure changes them in place.
func TestEnsureStreamBounds(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := protocol.MustNames("")
	type bounds struct {
		bytes, msgs int64
		discard     jetstream.DiscardPolicy
	}
	check := func(r *provision.Resources, events, jobs, dlq bounds) {
		t.Helper()
		for name, c := range map[string]struct {
			s    jetstream.Stream
			want bounds
		}{"events": {r.Events, events}, "jobs": {r.Jobs, jobs}, "dlq": {r.DLQ, dlq}} {
			info, err := c.s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := (bounds{info.Config.MaxBytes, info.Config.MaxMsgs, info.Config.Discard}); got != c.want {
				t.Errorf("%s stream: bounds %+v, want %+v", name, got, c.want)
			}
		}
	}
	r, err := provision.Ensure(ctx, js, n, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(r, bounds{-1, -1, jetstream.DiscardNew}, bounds{-1, -1, jetstream.DiscardNew}, bounds{-1, -1, jetstream.DiscardOld})
	r, err = provision.Ensure(ctx, js, n, provision.Options{EventsMaxBytes: 10 << 20,
		JobsMaxBytes: 1 << 20, JobsMaxMsgs: 50, DLQMaxBytes: 2 << 20, DLQMaxMsgs: 60})
	if err != nil {
		t.Fatal(err)
	}
	check(r, bounds{10 << 20, -1, jetstream.DiscardNew}, bounds{1 << 20, 50, jetstream.DiscardNew}, bounds{2 << 20, 60, jetstream.DiscardOld})
}

// TestEnsureWorkspacesStream: the workspaces stream is append only (one
// message per subject, no rollup, delete or purge) and bounded, its bound
// reserved: a server whose store cannot hold it refuses it, and the error
// names workspacesMaxBytes. The Object Store bucket of an older baton is
// reported, not touched; a second Ensure changes nothing.
func TestEnsureWorkspacesStream(t *testing.T) {
	s := testenv.RunServerWith(t, func(o *server.Options) { o.JetStreamMaxStore = 64 << 20 })
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, n, provision.Options{WorkspacesMaxBytes: 1 << 30}); err == nil || !strings.Contains(err.Error(), "workspacesMaxBytes") {
		t.Fatalf("a 1 GiB workspaces stream on a 64 MiB store: %v; want the reservation refused, naming workspacesMaxBytes", err)
	}
	old, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: n.WorkspacesStream()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.PutBytes(ctx, "repo.tar.gz", []byte("old")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r, err := provision.Ensure(ctx, js, n, provision.Options{WorkspacesMaxBytes: 16 << 20})
		if err != nil {
			t.Fatalf("ensure #%d: %v", i, err)
		}
		if r.LegacyWorkspaces != "OBJ_"+n.WorkspacesStream() {
			t.Fatalf("the older bucket reported as %q", r.LegacyWorkspaces)
		}
		info, err := r.Workspaces.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := info.Config
		if c.MaxBytes != 16<<20 || c.Discard != jetstream.DiscardNew || c.MaxMsgsPerSubject != 1 || !c.DiscardNewPerSubject ||
			c.AllowRollup || !c.DenyDelete || !c.DenyPurge || c.AllowMsgTTL || c.MaxAge != 7*24*time.Hour {
			t.Fatalf("workspaces stream %+v", c)
		}
	}
	if _, err := old.GetBytes(ctx, "repo.tar.gz"); err != nil {
		t.Fatalf("the older bucket's archive: %v", err)
	}
}

// TestEnsureSessions: the sessions bucket, the checkpoints bucket
// (compressed, bounded, no TTL) and the jobs stream's session subjects;
// an older jobs stream gains them in place.
func TestEnsureSessions(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := protocol.MustNames("")
	old := n.JobsSubjects()[:3]
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: n.JobsStream(), Subjects: old, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	r, err := provision.Ensure(ctx, js, n, provision.Options{CheckpointsMaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Jobs.Info(ctx)
	if err != nil || !slices.Contains(info.Config.Subjects, "baton.jobs.session.*") {
		t.Fatalf("jobs stream subjects %v (%v)", info.Config.Subjects, err)
	}
	st, err := r.Checkpoints.Status(ctx)
	if err != nil || !st.IsCompressed() || st.TTL() != 0 || st.Bucket() != "BATON_CHECKPOINTS" {
		t.Fatalf("checkpoints bucket: %+v, %v", st, err)
	}
	if r.Sessions.Bucket() != "BATON_SESSIONS" {
		t.Fatalf("sessions bucket %s", r.Sessions.Bucket())
	}
	cs, err := js.Stream(ctx, "OBJ_BATON_CHECKPOINTS")
	if err != nil || cs.CachedInfo().Config.MaxBytes != 64<<20 {
		t.Fatalf("checkpoints stream bound: %v", err)
	}
}
