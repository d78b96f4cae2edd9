package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/worker"
)

// node is the node id of every worker the suite starts: hand-off and
// crash recovery happen between workers of one node.
const node = "bench"

// leaseTTL is the workers' lease TTL: short, so the crash row (which waits
// for a lease to expire) takes seconds, not minutes.
const leaseTTL = 3 * time.Second

// env is what the rows share: a directory, an embedded server, a client
// and the worker processes.
type env struct {
	dir      string
	stateDir string
	binary   string
	runner   string // the binary name the runner chain runs from
	config   string
	srv      *server.Server
	nc       *nats.Conn // publishing and reading
	sub      *nats.Conn // live subscriptions only
	js       jetstream.JetStream
	names    protocol.Names
	client   *client.Client
	progress io.Writer
	workers  []*workerProc
	// profileDir gets the workers' CPU profiles ("": none).
	profileDir string
	// prioritized: the workers' autogroups have the highest weight (see
	// prioritize); suitePrioritized: the suite's too, and restore undoes
	// it.
	prioritized      bool
	suitePrioritized bool
	restore          func()
	// bwrapAnchor and pastaAnchor are the start rows' anchor commands,
	// each run killed at anchorLimit (tests put stand-ins in).
	bwrapAnchor, pastaAnchor []string
	anchorLimit              time.Duration
}

// newEnv prepares a directory the sandbox user can traverse, a copy of
// the baton binary it can execute, a worker configuration, and a server.
func newEnv(binary string, progress io.Writer) (_ *env, err error) {
	e := &env{progress: progress, names: protocol.MustNames(""),
		bwrapAnchor: []string{"bwrap", "--ro-bind", "/", "/", "true"},
		pastaAnchor: []string{"pasta", "--config-net", "-q", "--", "true"},
		anchorLimit: anchorLimit,
	}
	if autogroupsOn() && os.Geteuid() == 0 {
		// In the default autogroup the suite's threads already weigh one
		// group each; the workers, which start sessions, still need it.
		switch e.restore, err = prioritize(0); {
		case err == nil:
			e.suitePrioritized = true
		case !errors.Is(err, errRootAutogroup):
			return nil, err
		}
		e.prioritized = true
	}
	if e.dir, err = os.MkdirTemp("", "baton-bench-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.close(false)
		}
	}()
	// A root worker's sandbox runs as an unprivileged uid that must reach
	// the binary and the run directories.
	e.stateDir = filepath.Join(e.dir, "state")
	for _, d := range []string{e.dir, e.stateDir, filepath.Join(e.dir, "bin")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, err
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return nil, err
		}
	}
	e.binary = filepath.Join(e.dir, "bin", "baton")
	if err := copyFile(binary, e.binary, 0o755); err != nil {
		return nil, fmt.Errorf("bench: copy the baton binary: %w", err)
	}
	// The workers run the chain from baton-runner when it is beside baton.
	e.runner = "baton"
	runner := filepath.Join(filepath.Dir(binary), worker.RunnerName)
	if _, err := os.Stat(runner); err == nil {
		if err := copyFile(runner, filepath.Join(e.dir, "bin", worker.RunnerName), 0o755); err != nil {
			return nil, fmt.Errorf("bench: copy the runner binary: %w", err)
		}
		e.runner = worker.RunnerName
	}
	e.config = filepath.Join(e.dir, "worker.yaml")
	if err := os.WriteFile(e.config, []byte(workerConfig), 0o600); err != nil {
		return nil, err
	}
	e.srv, err = server.NewServer(&server.Options{
		ServerName: "baton-bench", Host: "127.0.0.1", Port: -1,
		JetStream: true, StoreDir: filepath.Join(e.dir, "nats"), NoSigs: true, NoLog: true,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: nats-server: %w", err)
	}
	go e.srv.Start()
	if !e.srv.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("bench: nats-server did not start")
	}
	if e.nc, err = nats.Connect(e.srv.ClientURL(), nats.Name("baton-bench")); err != nil {
		return nil, err
	}
	if e.sub, err = nats.Connect(e.srv.ClientURL(), nats.Name("baton-bench-subscriber")); err != nil {
		return nil, err
	}
	if e.js, err = jetstream.New(e.nc); err != nil {
		return nil, err
	}
	if e.client, err = client.New(e.js, e.names); err != nil {
		return nil, err
	}
	// The anchors publish before any worker has provisioned.
	pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := provision.Ensure(pctx, e.js, e.names, provision.Options{Replicas: 1, LeaseTTL: leaseTTL}); err != nil {
		return nil, fmt.Errorf("bench: provision: %w", err)
	}
	return e, nil
}

// workerConfig: the fake agent for throughput and start, the stamping
// agent for latency, hand-off, crash and scale; no network. The agents are
// Go programs: one P each (GOMAXPROCS=1) makes a wake-up cheaper (about
// 0.6% instead of 0.9% of a core at 50 lines/s), which matters with 200 of
// them on 2 cores.
var workerConfig = configWithTTL(leaseTTL)

// configWithTTL is workerConfig with another lease TTL.
func configWithTTL(ttl time.Duration) string {
	// No disk budget: hundreds of runs of the default limits (4 GiB disk,
	// 1 GiB output each) are far more than the host's disk, and the
	// suite's agents write little. No pool (pool: 0, not the adaptive
	// default): the rows time and count cold starts and their runs alone;
	// the start row has pooled profiles of its own.
	return `leaseTTL: ` + ttl.String() + `
concurrency: 4
diskBudget: false
profiles:
  fake:
    command: ["{baton}", "fake-agent"]
    env: {GOMAXPROCS: "1"}
    allowArgs: true
    timeout: 1h
    pool: 0
    network: none
  stamp:
    command: ["{baton}", "bench", "agent"]
    env: {GOMAXPROCS: "1"}
    allowArgs: true
    timeout: 1h
    pool: 0
    network: none
  stamp-batch:
    command: ["{baton}", "bench", "agent"]
    env: {GOMAXPROCS: "1"}
    allowArgs: true
    timeout: 1h
    pool: 0
    network: none
    nice: 19
  line:
    command: ["/bin/echo", "{\"type\":\"bench\",\"line\":1}"]
    timeout: 1h
    pool: 0
    network: none
  echo:
    command: ["{baton}", "bench", "echo"]
    env: {GOMAXPROCS: "1"}
    timeout: 1h
    pool: 0
    network: none
    stdin: stream
  chat:
    command: ["{baton}", "fake-agent", "--chat"]
    env: {GOMAXPROCS: "1"}
    timeout: 1h
    pool: 0
    network: none
    stdin: stream
    turnEnd: {field: type, equals: result}
    session: {pauseAfter: 1s}
`
}

func (e *env) logf(format string, args ...any) {
	if e.progress != nil {
		fmt.Fprintf(e.progress, "bench: "+format+"\n", args...)
	}
}

// close stops every worker and runner the suite started and the server,
// and removes the directory unless keep.
func (e *env) close(keep bool) {
	for _, w := range e.workers {
		w.stop(15 * time.Second)
	}
	e.endRuns()
	if e.restore != nil {
		e.restore()
	}
	if e.nc != nil {
		e.nc.Close()
	}
	if e.sub != nil {
		e.sub.Close()
	}
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
	if keep {
		e.logf("kept %s", e.dir)
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(e.stateDir, "runs", "*"))
	for _, d := range dirs {
		_ = sandbox.ReleaseWorkspace(journal.Dir(d))
	}
	_ = os.RemoveAll(e.dir)
}

// endRuns cancels every runner still alive (runners are detached: they
// outlive workers, and would outlive the suite) and waits for them.
func (e *env) endRuns() {
	dirs, _ := filepath.Glob(filepath.Join(e.stateDir, "runs", "*"))
	deadline := time.Now().Add(15 * time.Second)
	for _, d := range dirs {
		dir := journal.Dir(d)
		for {
			err := sandbox.Cancel(dir)
			if err == nil || errors.Is(err, sandbox.ErrNotRunning) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, d := range dirs {
		for time.Now().Before(deadline) {
			if alive, err := sandbox.Alive(journal.Dir(d)); err != nil || !alive {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// workerProc is a probe worker process.
type workerProc struct {
	id     string
	cmd    *exec.Cmd
	report atomic.Pointer[probeReport]
	exited chan struct{}
	err    error // set before exited closes
}

// startWorker starts a probe worker of the bench node and waits until it
// is ready.
func (e *env) startWorker(ctx context.Context, id string, concurrency int) (*workerProc, error) {
	return e.startWorkerWith(ctx, id, concurrency, e.config)
}

// startWorkerWith starts a probe worker with the configuration file cfg.
func (e *env) startWorkerWith(ctx context.Context, id string, concurrency int, cfg string) (*workerProc, error) {
	logf, err := os.Create(filepath.Join(e.dir, id+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := []string{"--nats", e.srv.ClientURL(), "--config", cfg, "--state-dir", e.stateDir,
		"--node", node, "bench", "worker", "--id", id, "--concurrency", strconv.Itoa(concurrency)}
	if e.profileDir != "" {
		args = append(args, "--cpuprofile", filepath.Join(e.profileDir, id+".cpu.pprof"))
	}
	if lvl := os.Getenv("BATON_BENCH_WORKER_LOG"); lvl != "" {
		args = append(args, "--log-level", lvl) // e.g. debug, to see retries
	}
	cmd := exec.Command(e.binary, args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = workerAttr()
	w := &workerProc{id: id, cmd: cmd, exited: make(chan struct{})}
	// Through a writer, not a pipe read to its end: Wait then returns
	// WaitDelay after the worker's end, whatever holds its stdout.
	cmd.Stdout = &reportWriter{w: w}
	cmd.WaitDelay = bounded.WaitDelay
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start worker %s: %w", id, err)
	}
	e.workers = append(e.workers, w)
	if e.prioritized {
		if _, err := prioritize(cmd.Process.Pid); err != nil {
			e.logf("worker %s: %v", id, err)
		}
	}
	go func() {
		w.err = cmd.Wait()
		close(w.exited)
	}()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		if r := w.report.Load(); r != nil && r.Ready {
			return w, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.exited:
			return nil, fmt.Errorf("bench: worker %s exited before it was ready (%v); see %s", id, w.err, logf.Name())
		case <-deadline.C:
			return nil, fmt.Errorf("bench: worker %s not ready after 30s; see %s", id, logf.Name())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// reportWriter takes a probe worker's stdout, one report a line.
type reportWriter struct {
	w    *workerProc
	line []byte
}

func (r *reportWriter) Write(p []byte) (int, error) {
	r.line = append(r.line, p...)
	for {
		i := bytes.IndexByte(r.line, '\n')
		if i < 0 {
			break
		}
		var rep probeReport
		if json.Unmarshal(r.line[:i], &rep) == nil {
			r.w.report.Store(&rep)
		}
		r.line = r.line[i+1:]
	}
	if len(r.line) > 64<<10 {
		r.line = nil // not a report
	}
	return len(p), nil
}

func (w *workerProc) pid() int { return w.cmd.Process.Pid }

func (w *workerProc) goroutines() int {
	if r := w.report.Load(); r != nil {
		return r.Goroutines
	}
	return 0
}

func (w *workerProc) signal(sig syscall.Signal) { _ = w.cmd.Process.Signal(sig) }

// stop ends the worker with SIGTERM (hand-off), or SIGKILL after timeout.
func (w *workerProc) stop(timeout time.Duration) {
	select {
	case <-w.exited:
		return
	default:
	}
	w.signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(timeout):
		w.signal(syscall.SIGKILL)
		<-w.exited
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
