package worker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/tenancy"
)

// InboxPrefix is the inbox prefix of a worker's connection: replies to the
// worker (JetStream API, jobs fetched, KV watches) come there, and a
// deployment lets only workers subscribe to it.
const InboxPrefix = protocol.WorkerInboxPrefix

// Version is reported in node heartbeats, worker statuses and the micro
// services (which need a semantic version); the build sets it.
var Version = "0.0.0-dev"

// Worker consumes jobs and publishes the runs it holds.
type Worker struct {
	nc *nats.Conn
	// svc is the connection the micro service is served from and answers
	// on (WithServiceConn); serve makes it nc when unset.
	svc      *nats.Conn
	js       jetstream.JetStream
	cfg      *config.Config
	names    protocol.Names
	node     string
	id       string
	stateDir string
	binary   string // the baton binary, for profiles' "{baton}"
	runner   string // the binary the runner chain runs from
	log      zerolog.Logger
	grace    time.Duration
	ackWait  time.Duration
	// fastBatches: the events stream has one replica and allows fast
	// batches (publisher.WithFastBatches).
	fastBatches bool
	reg         prometheus.Registerer
	metrics     *metrics
	ready       chan struct{}

	intake *consumer.Intake
	// slots are the concurrency keys' slots across the cluster; tenancy
	// is the configuration's tenancy now (Reload replaces it).
	slots   *tenancy.Slots
	tenancy atomic.Pointer[config.Tenancy]
	runs    *kv.Runs
	leases  *kv.Leases
	// live is this worker's liveness key, which keeps every lease it
	// holds (package lease).
	live  *lease.Liveness
	nodes *kv.Nodes
	// index holds the unfinished runs by node, for the reaper.
	index nodeIndex
	// outputs is the bucket runs' captures go to (see captureOutputs).
	outputs jetstream.ObjectStore
	// workspaces is the stream of archives jobs seed their workspaces
	// from (see seedWorkspace).
	workspaces jetstream.Stream
	// sessions and checkpoints keep sessions' records and checkpoints
	// (session.go).
	sessions *session.Store
	// approvals are runs' permission prompts (approvals.go).
	approvals   *kv.Store[protocol.Approval]
	checkpoints jetstream.ObjectStore
	// transfers is the connection outputs and checkpoints move on
	// (transfers.go); nil when it could not be dialed.
	transfers *nats.Conn

	mu     sync.Mutex
	active map[string]*run
	// starting holds the runs a start of this worker is preparing: all
	// its attempts share its id, which is what tells a takeover from our
	// own write (markSpawning), so they never overlap.
	starting map[string]bool
	// stoppingLost holds the runs declared lost whose agent this worker
	// is stopping (stopLostAgent).
	stoppingLost map[string]bool
	// testBeforeMark, set by tests, runs before a start marks its run
	// spawning.
	testBeforeMark func(runID string)
	// testBeforeSetupCheckpoint, set by tests, runs before a session's
	// setup is checkpointed.
	testBeforeSetupCheckpoint func(ctx context.Context, runID string)
	// testBeforeRecordTerminal, set by tests, runs between the publish of
	// a run's terminal status and the write of its terminal record.
	testBeforeRecordTerminal func(runID string)
	// clock is what the background services (services.go) and the
	// liveness read and wait on: clock.Real (each service's test gives it
	// a clock.Manual).
	clock clock.Clock
	// inputPokes wake the input feeders of the runs held here (input.go).
	inputPokes map[string]chan struct{}
	// inputTails are the last input message this worker stored per run
	// (storeInput), inputStream the input stream's handle: a store needs
	// one round trip to NATS while no other worker stores for the run.
	inputTails  map[string]inputTail
	inputStream jetstream.Stream
	// inputHints hand the feeders of the runs held here what this
	// worker stored for them.
	inputHints map[string]*inputHints
	// notice is how notices to a run's holder are sent again (notice.go).
	notice noticeTiming
	// pools are the profiles' prestarted sandboxes (pool.go), by profile;
	// set before the worker consumes.
	pools map[string]*chainPool
	// refusals bounds the log of requests refused for their reply
	// subject (service.go).
	refusals refusalLog
	// admitted are the runs the disk budget let in whose start has not
	// returned, with what each may write (diskbudget.go); diskHeldLog is
	// when the budget last logged a job it held, zero while it holds none.
	admitted    map[string]runNeed
	diskHeldLog time.Time
	// boundedDisk: runs get a workspace image of limits.disk (a root
	// worker's).
	boundedDisk bool
}

// Option configures a Worker. An option given a value it cannot take
// makes New fail with an error wrapping ErrInvalidOption.
type Option func(*Worker) error

// ErrInvalidOption: an option was given a value it cannot take.
var ErrInvalidOption = errors.New("worker: invalid option")

func invalidOption(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
}

// WithNode sets the node id (default: the host name as a token).
// An empty id keeps the default.
func WithNode(id string) Option {
	return func(w *Worker) error {
		if id != "" && !protocol.ValidNodeID(id) {
			return invalidOption("node id %q must match [A-Za-z0-9_-]{1,64}", id)
		}
		w.node = id
		return nil
	}
}

// WithID sets the worker id (default: node-pid-random).
// An empty id keeps the default.
func WithID(id string) Option {
	return func(w *Worker) error {
		if id != "" && !protocol.ValidNodeID(id) {
			return invalidOption("worker id %q must match [A-Za-z0-9_-]{1,64}", id)
		}
		w.id = id
		return nil
	}
}

// WithStateDir sets the directory holding run directories.
func WithStateDir(dir string) Option {
	return func(w *Worker) error {
		if dir == "" {
			return invalidOption("the state directory is empty")
		}
		w.stateDir = dir
		return nil
	}
}

// WithBinary sets the baton binary profiles' "{baton}" stands for
// (default: this executable).
// An empty path keeps the default.
func WithBinary(path string) Option { return func(w *Worker) error { w.binary = path; return nil } }

// RunnerName is the runner binary a worker looks for beside the baton
// binary (see WithRunner).
const RunnerName = "baton-runner"

// FindRunner is the runner binary a worker whose baton binary is baton uses
// by default: RunnerName beside it when that is an executable file, else
// baton itself.
func FindRunner(baton string) string {
	beside := filepath.Join(filepath.Dir(baton), RunnerName)
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return beside
	}
	return baton
}

// WithRunner sets the binary whose runner-outer subcommand starts each run
// (default: RunnerName beside the baton binary if it is there, else the
// baton binary itself, which has the same stages but starts slower).
// An empty path keeps the default.
func WithRunner(path string) Option { return func(w *Worker) error { w.runner = path; return nil } }

// WithLogger sets the logger.
func WithLogger(l zerolog.Logger) Option { return func(w *Worker) error { w.log = l; return nil } }

// WithMetrics registers the worker's Prometheus series with reg.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(w *Worker) error {
		if reg == nil {
			return invalidOption("nil metrics registerer")
		}
		w.reg = reg
		return nil
	}
}

// WithAckWait sets the jobs consumers' AckWait (default 60s): how long a job
// taken by a worker that died waits before another worker gets it.
func WithAckWait(d time.Duration) Option {
	return func(w *Worker) error {
		if d <= 0 {
			return invalidOption("ack wait %v must be positive", d)
		}
		w.ackWait = d
		return nil
	}
}

// WithGrace bounds the hand-off of every run when the worker stops
// (default 10s): past it, a run is left to recovery instead (its lease ends
// with the worker's liveness key).
// A grace of 0 hands nothing off.
func WithGrace(d time.Duration) Option {
	return func(w *Worker) error {
		if d < 0 {
			return invalidOption("grace %v is negative", d)
		}
		w.grace = d
		return nil
	}
}

// WithServiceConn sets the connection the worker's micro service (status,
// cancel, input, interrupt, and micro's $SRV.PING/INFO/STATS) is served
// from, so every answer is published with its user's rights: give it a
// user that may publish only into inboxes (worker-svc in
// deploy/nats-auth.conf), and the server itself refuses an answer
// reflected anywhere else. Default: nc, where the worker's own check of
// each reply subject is all that guards its answers, which it says at
// start; pass nc itself to serve there knowingly (a server without users).
func WithServiceConn(svc *nats.Conn) Option {
	return func(w *Worker) error {
		if svc == nil {
			return invalidOption("nil service connection")
		}
		w.svc = svc
		return nil
	}
}

// New returns a worker publishing through nc.
func New(nc *nats.Conn, cfg *config.Config, opts ...Option) (*Worker, error) {
	names, err := protocol.NewNames(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		nc: nc, js: js, cfg: cfg, names: names,
		log:     zerolog.Nop(),
		grace:   10 * time.Second,
		ackWait: 60 * time.Second,
		active:  map[string]*run{}, starting: map[string]bool{}, stoppingLost: map[string]bool{}, admitted: map[string]runNeed{},
		boundedDisk: os.Geteuid() == 0,
		ready:       make(chan struct{}),
		notice:      defaultNoticeTiming,
		clock:       clock.Real,
	}
	for _, o := range opts {
		if err := o(w); err != nil {
			return nil, err
		}
	}
	if w.node == "" {
		h, _ := os.Hostname()
		w.node = protocol.NodeIDFrom(h)
	}
	if !protocol.ValidNodeID(w.node) {
		return nil, fmt.Errorf("worker: node id %q must match [A-Za-z0-9_-]{1,64}", w.node)
	}
	if w.id == "" {
		w.id = fmt.Sprintf("%s-%d-%s", w.node, os.Getpid(), randomHex(2))
	}
	if w.stateDir == "" {
		return nil, errors.New("worker: a state directory is required")
	}
	if w.binary == "" {
		if w.binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("worker: find own binary: %w", err)
		}
	}
	if w.runner == "" {
		w.runner = FindRunner(w.binary)
	}
	w.log = w.log.With().Str("worker", w.id).Str("node", w.node).Logger()
	w.metrics = newMetrics(w.reg, w)
	ten := cfg.Tenancy
	w.tenancy.Store(&ten)
	return w, nil
}

// ID is the worker's id.
func (w *Worker) ID() string { return w.id }

// Ready is closed once the worker has provisioned NATS and consumes jobs.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// Run provisions, then serves jobs until ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.prepareStateDir(); err != nil {
		return err
	}
	if err := w.openStores(ctx); err != nil {
		return err
	}
	defer func() {
		if w.transfers != nil {
			w.transfers.Close() // after the runs' last checkpoints (deferred below, so run first)
		}
	}()
	// Renewed until every run is handed off and every background loop
	// has returned (the deferred calls below run first), whatever ctx.
	// This worker's record names each session as it opens (a session lost
	// to an outage is replaced by another): a sibling ends the one named.
	live, err := lease.Live(ctx, w.js, w.leases, lease.Holder{Worker: w.id, Node: w.node}, w.cfg.LeaseTTL,
		lease.WithLogger(w.log), lease.WithClock(w.clock), lease.WithOnSession(w.recordSession))
	if err != nil {
		return fmt.Errorf("worker: liveness: %w", err)
	}
	w.live = live
	// Removed once the liveness has ended (the deferred Close below runs
	// first): until then, a worker of the node that sees this process
	// gone ends its session.
	defer w.removeWorkerFile()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), w.grace)
		defer cancel()
		if err := w.live.Close(cctx); err != nil {
			w.log.Warn().Err(err).Msg("remove liveness key; it expires instead")
		}
	}()

	parent := ctx
	var bg sync.WaitGroup
	defer bg.Wait()
	// A worker that cannot consume stops everything, heartbeat included,
	// and returns why: a node that heartbeats but takes no job hides the
	// fault (issue 13 item 7).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.startBackground(ctx, &bg)
	// Up before Ready, so a ready worker answers requests.
	if stop, err := w.serve(ctx); err != nil {
		w.log.Warn().Err(err).Msg("micro service: this worker answers no status nor cancel requests")
	} else {
		defer func() { _ = stop() }()
	}

	w.log.Info().Str("state_dir", w.stateDir).Str("runner", w.runner).Int("concurrency", w.cfg.Concurrency).Msg("worker ready")
	close(w.ready)
	err = w.intake.Run(ctx, w.cfg.Concurrency, w.node, consumer.Handlers{Run: w.dispatch, Attach: w.dispatchAttach, Admit: w.admit})
	if parent.Err() != nil {
		return nil // stopping is not an error
	}
	if err != nil {
		w.log.Error().Err(err).Msg("worker stops: it cannot consume jobs")
	}
	return err
}

// openStores provisions the streams and buckets and opens the worker's
// stores and intake on them.
func (w *Worker) openStores(ctx context.Context) error {
	for _, l := range w.fitMaxPayload() {
		w.log.Warn().Int64("max_payload", w.nc.MaxPayload()).Msg(l)
	}
	res, err := provision.Ensure(ctx, w.js, w.names, provision.Options{
		Replicas:      w.cfg.Replicas,
		LeaseTTL:      w.cfg.LeaseTTL,
		EventsMaxAge:  w.cfg.EventsMaxAge,
		RecordTTL:     w.cfg.RecordTTL(),
		OutputsMaxAge: w.cfg.OutputsTTL(), WorkspacesMaxAge: w.cfg.WorkspacesTTL(),
		WorkspacesMaxBytes: w.cfg.WorkspacesStreamMaxBytes(),
		// Validated to fit.
		EventsMaxBytes: int64(w.cfg.EventsMaxBytes),
		JobsMaxBytes:   int64(w.cfg.JobsMaxBytes), JobsMaxMsgs: w.cfg.JobsMaxMsgs,
		DLQMaxBytes: int64(w.cfg.DLQMaxBytes), DLQMaxMsgs: w.cfg.DLQMaxMsgs,
		CheckpointsMaxBytes: w.cfg.CheckpointsBytes(),
	})
	if err != nil {
		return explainNATS(w.nc, err)
	}
	w.checkpoints, w.outputs, w.workspaces = res.Checkpoints, res.Outputs, res.Workspaces
	ev := res.Events.CachedInfo().Config
	w.fastBatches = ev.Replicas == 1 && ev.AllowBatchPublish
	w.openTransfers(ctx)
	if w.sessions, err = session.NewStore(kv.NewStore[kv.SessionRecord](res.Sessions), w.checkpoints); err != nil {
		return err
	}
	w.runs = kv.NewStore[kv.RunRecord](res.Runs)
	w.approvals = kv.NewStore[protocol.Approval](res.Approvals)
	w.leases = kv.NewStore[kv.LeaseRecord](res.Leases)
	w.nodes = kv.NewStore[kv.NodeRecord](res.Nodes)
	w.index = nodeIndex{kv: res.NodeRuns, log: w.log}
	if res.LegacyWorkspaces != "" {
		w.log.Warn().Str("stream", res.LegacyWorkspaces).Msgf("the workspaces object store of an older baton is no longer read (archives are uploaded to the stream %s): delete it with `nats stream rm %s` once no queued job names one of its archives",
			w.names.WorkspacesStream(), res.LegacyWorkspaces)
	}
	w.slots = tenancy.NewSlots(res.Slots, w.id, w.log)
	w.intake = consumer.New(w.js, w.names, w.cfg,
		consumer.WithLogger(w.log), consumer.WithSelf(w.binary),
		consumer.WithTenancy(w.tenancy.Load), consumer.WithSlots(w.slots, w.runState),
		consumer.WithAckWait(w.ackWait),
		consumer.WithOnReject(func(r protocol.Reason) { w.metrics.rejected.WithLabelValues(string(r)).Inc() }),
		consumer.WithOnDrop(func(r protocol.Reason) { w.metrics.dropped.WithLabelValues(string(r)).Inc() }))
	return nil
}

// fitMaxPayload lowers, on a copy of the worker's configuration, the
// limits that must fit the connected server's max_payload
// (config.FitMaxPayload), and says what it lowered.
func (w *Worker) fitMaxPayload() []string {
	cfg := *w.cfg
	lowered := cfg.FitMaxPayload(w.nc.MaxPayload())
	if len(lowered) > 0 {
		w.cfg = &cfg
	}
	return lowered
}

// prepareStateDir creates the state directory. A root worker runs agents as
// an unprivileged uid, which must be able to traverse to its workspace and
// execute baton, so the directories are 0711 and the binary is copied into
// the state dir where that uid can run it.
func (w *Worker) prepareStateDir() error {
	for _, d := range []string{w.stateDir, filepath.Join(w.stateDir, "runs")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("worker: state dir: %w", err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("worker: state dir: %w", err)
		}
	}
	if os.Geteuid() != 0 {
		return nil
	}
	bin := filepath.Join(w.stateDir, "bin")
	dst, err := installBinary(w.binary, bin, "baton")
	if err != nil {
		return fmt.Errorf("worker: install baton binary: %w", err)
	}
	if w.runner == w.binary {
		w.binary, w.runner = dst, dst
		return nil
	}
	w.binary = dst
	if w.runner, err = installBinary(w.runner, bin, RunnerName); err != nil {
		return fmt.Errorf("worker: install runner binary: %w", err)
	}
	return nil
}

// installBinary copies src into dir as name-<hash of its content>, so a
// deploy that replaces the worker's binaries never changes what running
// runners execute.
func installBinary(src, dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(h, in); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, name+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(dst); err == nil {
		// Claimed anew, so pruneBinaries keeps it.
		now := time.Now()
		return dst, os.Chtimes(dst, now, now)
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".baton-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp.Name(), dst)
}

// errInvalidRunID refuses a run id that cannot name a run directory: run
// ids reach the worker from NATS (KV keys, records, jobs), and one such as
// "<id>/workspace" would make a directory the agent writes a run
// directory that root reads and writes files in.
var errInvalidRunID = errors.New("invalid run id")

// runDir is the directory of a run in stateDir; it refuses an id that is
// not a valid run id (errInvalidRunID).
func runDir(stateDir, runID string) (journal.Dir, error) {
	if !protocol.ValidRunID(runID) {
		return "", fmt.Errorf("%w %q: a run id is 1 to 128 letters, digits, '_' or '-'", errInvalidRunID, runID)
	}
	return journal.Dir(filepath.Join(stateDir, "runs", runID)), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
