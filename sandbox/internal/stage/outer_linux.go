package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

// RunOuter is `baton runner-outer --spec PATH`, the host side of the
// chain. It takes the run's lock, opens what the chain needs (journal,
// stderr.log, the workspace, the profile's mounts), and, when started as
// root, drops for good to the spec's sandbox uid. It then clones
// runner-inner into a new user and network namespace with the agent's
// stdin (a pipe it alone writes: the job's input, then with stdin
// "stream" the run's input messages), stdout (a pipe it copies into the journal) and
// stderr (stderr.log), attaches pasta to that namespace when the network
// needs it, serves the egress proxy and DNS stub on the sockets
// runner-inner made there, enforces the deadline, and ends the journal
// with the sentinel once the chain has ended.
//
// Signals: SIGUSR1 (sandbox.Cancel) stops the agent with reason
// "cancel", the deadline with reason "timeout", SIGUSR2
// (sandbox.StopIdle) with reason "timeout" and detail IdleReason. SIGTERM
// or SIGINT sent to the runner itself (an admin, a host shutdown) stops
// the agent the same way with reason "signal": the sentinel keeps the
// agent's real exit code, and names the signal that killed it, or else
// the one the runner received. Stopping is SIGTERM to the sandbox, then
// SIGKILL of the whole sandbox after the spec's grace period. SIGHUP is
// ignored. Cancelling ctx acts as SIGTERM.
//
// The runner is not a child that dies with the worker: sandbox.Start puts
// it in its own session. If the runner itself is killed, its chain
// follows it (parent-death signals), so no agent runs unjournaled.
func RunOuter(ctx context.Context, specPath string) error {
	if outerReexec != "off" {
		chain.HoldStops([]string{heldEnv})
	}
	// Subscribed first: a signal during setup is handled once the chain runs.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, outerSignals...)
	defer signal.Stop(sigs)
	ready := takeReadyPipe()
	pool := takePoolSocket()
	// Nothing inherited or opened here reaches runner-inner unless passed
	// on purpose.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		err = fmt.Errorf("runner-outer: mark descriptors close-on-exec: %w", err)
		ready.fail(err)
		return err
	}
	spec, err := chain.ReadSpec(specPath)
	if err != nil {
		err = fmt.Errorf("runner-outer: %w", err)
		ready.fail(err)
		return err
	}
	if spec.Pooled != (pool != nil) {
		err := fmt.Errorf("runner-outer: a prestarted chain's spec comes with the pool's socket (pooled %v, socket %v)", spec.Pooled, pool != nil)
		ready.fail(err)
		return err
	}
	dir := journal.Dir(spec.RunDir)
	st := openState(dir.State(), "outer")
	defer st.close()
	st.ok("spec", specSummary(spec))
	if how := heldHow(); how != "" {
		st.ok("hold-stops", how)
	}
	if spec.Nice != 0 {
		// First: the rest of the start runs at it too.
		late := func(err error) {
			if err != nil {
				st.fail("nice-autogroup", err)
			} else {
				st.ok("nice-autogroup", "set after the kernel's wait")
			}
		}
		if detail, err := applyNice(spec.Nice, late); err != nil {
			st.fail("nice", err)
		} else {
			st.ok("nice", detail)
		}
	}
	o := &outerRun{spec: spec, dir: dir, st: st, pool: pool}
	inner, err := o.setup(ctx)
	if err != nil {
		ready.fail(err)
		return err
	}
	defer o.lock.Close()
	defer o.cleanup()
	ready.ok()
	st.ok("ready", "")
	if o.pool != nil {
		if err := o.awaitTake(ctx, inner, sigs); err != nil {
			return err
		}
		// runner-inner has exited, the init handed over.
		inner = nil
	}
	return o.supervise(ctx, inner, sigs)
}

// outerRun is runner-outer's state for one run.
type outerRun struct {
	spec   runspec.Spec
	dir    journal.Dir
	st     *state
	lock   *os.File
	jw     *journal.Writer
	stderr *os.File // stderr.log
	// stderrPipe is the read end of the agent's stderr, copied into
	// stderr.log within limits.stderr (stderrLog).
	stderrPipe *os.File
	stdout     *os.File // read end of the agent's stdout
	status     *os.File // read end of the chain's status pipe
	ctl        *os.File // write end of the control pipe: stop requests to the sandbox's init
	chain      *os.File // socket pair with runner-inner: egress sockets, the init's pidfd
	init       *initProc
	plan       *outerPlan
	net        *outerNet // nil with no network
	disk       *os.File  // the workspace, if it is bounded (see limits.disk)
	stdin      *agentStdin
	input      *net.UnixListener // stdin "stream": the worker's input messages
	// With tools: the workers' tools socket, and the agent's (in the
	// sandbox's network namespace) until served (serveTools).
	tools      *net.UnixListener
	toolsAgent *os.File
	// pool is a prestarted chain's socket to its worker, until its take
	// (sandbox.Prestart); initDone is the init's end once awaitTake watches it.
	pool     *os.File
	initDone <-chan syscall.WaitStatus
	// The agent's stdin and what to write to it first, until the
	// services start (startStdin).
	stdinW, stdinSrc *os.File
}

// setup takes the run and starts runner-inner. A failure before the
// journal exists leaves no journal: nothing ran, and another runner may
// hold the run. A failure after ends the journal with an "error" sentinel.
func (o *outerRun) setup(ctx context.Context) (*innerProc, error) {
	lock, err := chain.LockRun(o.dir.Lock())
	if err != nil {
		o.st.fail("lock", err)
		return nil, fmt.Errorf("runner-outer: lock %s: %w", o.dir.Lock(), err)
	}
	o.st.ok("lock", "")
	// A journal means a runner already ran this run: never a second agent.
	if _, err := os.Lstat(o.dir.Journal()); !errors.Is(err, fs.ErrNotExist) {
		lock.Close()
		err = fmt.Errorf("runner-outer: journal %s already exists: this run was started before", o.dir.Journal())
		o.st.fail("journal", err)
		return nil, err
	}
	o.lock = lock
	if err := chain.WritePIDFile(o.dir.PID(), os.Getpid()); err != nil {
		o.st.fail("pid-file", err)
		return nil, o.abandon(fmt.Errorf("runner-outer: write pid file: %w", err))
	}
	o.st.ok("pid-file", "")
	// A prestarted chain's journal is created by the worker that takes
	// it, and comes with the take.
	if !o.spec.Pooled {
		if o.jw, err = journal.OpenWriter(o.dir.Journal()); err != nil {
			o.st.fail("journal", err)
			return nil, o.abandon(fmt.Errorf("runner-outer: %w", err))
		}
		o.jw.SetLimit(int64(o.spec.Limits.Output))
		o.st.ok("journal", "")
	}
	if o.stderr, err = o.dir.Open(journal.StderrName, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o640); err != nil {
		return nil, o.startFailed("stderr", fmt.Errorf("open %s: %w", o.dir.Stderr(), err))
	}
	// A crash of the runner itself then leaves its trace where a person
	// looks for the run's errors.
	if err := unix.Dup3(int(o.stderr.Fd()), 2, 0); err != nil {
		return nil, o.startFailed("stderr", fmt.Errorf("redirect the runner's stderr: %w", err))
	}
	o.st.ok("stderr", "")
	// Input messages and interrupts come on it (a run with stdin "once"
	// takes only interrupts). Made while the runner may still be root:
	// only the worker may connect.
	if o.input, err = listenInput(o.dir); err != nil {
		return nil, o.startFailed("input-socket", err)
	}
	o.st.ok("input-socket", "")
	if o.spec.Tools != nil {
		if o.tools, err = listenTools(o.dir); err != nil {
			return nil, o.startFailed("tools-socket", err)
		}
		o.st.ok("tools-socket", "")
	}
	if o.plan, err = o.prepare(); err != nil {
		return nil, o.startFailed("prepare", err)
	}
	o.disk = boundedWorkspace(o.dir)
	o.st.ok("prepare", o.plan.summary())
	// runner-inner exits once the sandbox runs: its child, the sandbox's
	// init, is reparented here, so this runner can wait for it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		o.plan.closeFiles()
		o.cleanup()
		return nil, o.startFailed("subreaper", err)
	}
	if detail, err := dropPrivileges(o.spec); err != nil {
		o.plan.closeFiles()
		o.cleanup()
		return nil, o.startFailed("drop-privileges", err)
	} else if detail != "" {
		o.st.ok("drop-privileges", detail)
	}
	inner, err := o.startInner()
	if err != nil {
		o.cleanup()
		return nil, o.startFailed("start-inner", err)
	}
	o.st.ok("start-inner", fmt.Sprintf("pid %d", inner.cmd.Process.Pid))
	if o.plan.inner.Net.Mode != chain.NetNone || o.plan.inner.Tools {
		if err := o.startNetwork(ctx, inner); err != nil {
			o.killChain(inner)
			<-inner.done
			// runner-inner may have said why it ended (nft failed or
			// hung, say): the cause, where err is its consequence.
			if r := readChainStatus(o.status); r.status != nil && r.status.Error != "" {
				err = errors.New(r.status.Error)
			}
			o.cleanup()
			return nil, o.startFailed("network", err)
		}
	}
	// Nothing of the sandbox's uid (pasta, which parses the agent's
	// packets, included) may read or trace this runner, which holds the
	// journal open for writing.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		o.st.fail("non-dumpable", err)
	}
	return inner, nil
}

// abandon releases the run without a journal.
func (o *outerRun) abandon(err error) error {
	o.lock.Close()
	return err
}

// startFailed ends the journal with an "error" sentinel for a chain that
// could not start (a prestarted chain has none yet: nothing ran).
func (o *outerRun) startFailed(phase string, err error) error {
	o.st.fail(phase, err)
	if o.jw != nil {
		o.finish(journal.Sentinel{Exit: 1, Nonce: o.spec.Nonce, Reason: journal.ReasonError, Detail: err.Error()})
	} else if o.stderr != nil {
		o.stderr.Close()
	}
	o.lock.Close()
	return fmt.Errorf("runner-outer: %w", err)
}

// innerProc is the running runner-inner.
type innerProc struct {
	cmd  *exec.Cmd
	done <-chan error // its Wait result
}

// startInner starts runner-inner in a user and network namespace of its
// own, with the run's descriptors, and keeps this runner's ends of them.
func (o *outerRun) startInner() (*innerProc, error) {
	p := o.plan
	defer p.closeFiles()
	f, err := openInnerFiles(chain.MustJSON(p.inner))
	if err != nil {
		return nil, err
	}
	// runner-inner has its ends once started; this runner never needs them.
	defer f.closeChild()
	uid, gid := os.Geteuid(), os.Getegid()
	cmd := &exec.Cmd{
		// The running binary, even if a deploy replaced the file.
		Path:   "/proc/self/exe",
		Args:   []string{os.Args[0], chain.StageInner, "--spec", fmt.Sprintf("/proc/self/fd/%d", fdSpec)},
		Env:    chain.StageEnv,
		Stdin:  f.stdinR,
		Stdout: f.stdoutW,
		Stderr: f.stderrW,
		// fds 3..8, as inner_linux.go numbers them.
		ExtraFiles: []*os.File{f.statusW, f.spec, p.state, p.workspace, f.chainChild, f.ctlR},
		SysProcAttr: &syscall.SysProcAttr{
			// Its own user namespace (owned by this uid, so pasta, running
			// as this uid, may join it) and network namespace.
			Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
			GidMappingsEnableSetgroups: false,
			Credential:                 &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
			// The chain dies with the runner: nobody else journals the
			// agent. (The sandbox's init, reparented here, ends when the
			// control pipe closes instead.)
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if p.cgroup != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(p.cgroup.dir.Fd())
	}
	// A runner that dropped its privileges is not dumpable, and neither
	// would its child be until it executes: this runner could not write
	// the child's uid_map. Dumpable for the clone; setup ends it again.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		f.closeOurs()
		return nil, fmt.Errorf("set dumpable: %w", err)
	}
	done, err := startLocked(cmd)
	if err != nil {
		f.closeOurs()
		return nil, fmt.Errorf("start runner-inner: %w%s", err, cloneHint(err, uid))
	}
	if p.inner.Net.Mode != chain.NetNone {
		o.net = &outerNet{}
	}
	o.chain, o.stdout, o.status, o.ctl, o.stderrPipe = f.chain, f.stdoutR, f.statusR, f.ctlW, f.stderrR
	// The input file is the stdin writer's now, not the plan's.
	o.stdinW, o.stdinSrc = f.stdinW, p.input
	p.input = nil
	return &innerProc{cmd: cmd, done: done}, nil
}

// innerFiles are the descriptors runner-inner starts with: the ends it
// gets, and the ends this runner keeps.
type innerFiles struct {
	// The agent's stdin is a pipe, never the input file: agents such as
	// Claude Code read stream-json input only from a pipe. Its stderr is a
	// pipe too: stderr.log keeps its tail only, so it costs the node's disk
	// limits.stderr, whatever the agent prints (F10).
	stdinR, stdinW   *os.File
	stderrR, stderrW *os.File
	stdoutR, stdoutW *os.File
	statusR, statusW *os.File
	// Stop requests go to the sandbox's init on a pipe whose write end
	// only this runner holds: its close (this runner's death included)
	// ends the sandbox.
	ctlR, ctlW        *os.File
	spec              *os.File // the inner spec, sealed
	chain, chainChild *os.File // the chain's socket pair
}

// openInnerFiles makes them; on an error, none is left open.
func openInnerFiles(spec []byte) (f *innerFiles, err error) {
	f = &innerFiles{}
	defer func() {
		if err != nil {
			f.closeChild()
			f.closeOurs()
		}
	}()
	for _, pp := range []struct {
		what string
		r, w **os.File
	}{
		{"stdin", &f.stdinR, &f.stdinW}, {"stderr", &f.stderrR, &f.stderrW}, {"stdout", &f.stdoutR, &f.stdoutW},
		{"status", &f.statusR, &f.statusW}, {"control", &f.ctlR, &f.ctlW},
	} {
		if *pp.r, *pp.w, err = os.Pipe(); err != nil {
			return f, fmt.Errorf("%s pipe: %w", pp.what, err)
		}
	}
	if f.spec, err = sealedFile("baton-inner-spec", spec); err != nil {
		return f, fmt.Errorf("inner spec: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return f, fmt.Errorf("chain socket pair: %w", err)
	}
	f.chain, f.chainChild = os.NewFile(uintptr(fds[0]), "chain"), os.NewFile(uintptr(fds[1]), "chain-child")
	return f, nil
}

// closeChild closes the ends runner-inner gets (nil ones are skipped).
func (f *innerFiles) closeChild() {
	closeAll([]*os.File{f.stdinR, f.stderrW, f.stdoutW, f.statusW, f.ctlR, f.spec, f.chainChild})
}

// closeOurs closes the ends this runner keeps, when runner-inner did not
// start.
func (f *innerFiles) closeOurs() {
	closeAll([]*os.File{f.stdinW, f.stderrR, f.stdoutR, f.statusR, f.ctlW, f.chain})
}

// startStdin writes the job's input to the agent's stdin, then, with
// stdin "stream", the input messages.
func (o *outerRun) startStdin() {
	var line []byte
	if o.spec.InterruptLine != "" {
		line = []byte(o.spec.InterruptLine)
	}
	// The sandbox's init sends SIGINT to the agent's process group: a
	// stop request that does not stop the run.
	interrupt := func() error { return o.request(unix.SIGINT) }
	o.stdin = feedStdin(o.stdinW, o.stdinSrc, o.spec.Stdin.OrDefault() == runspec.StdinStream, o.st, line, interrupt)
}

// startLocked starts cmd from a goroutine locked to its OS thread until
// cmd ends: the kernel sends a parent-death signal when the thread that
// forked the child exits, and the Go runtime may retire idle threads.
func startLocked(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

// takeInit takes the sandbox's init from runner-inner, which has exited
// with err. false: it sent none, and why says how it ended.
func (o *outerRun) takeInit(err error) (why string, ok bool) {
	why = describeExit(err)
	o.st.ok("inner-exit", why)
	ip, rerr := receiveInit(o.chain)
	o.chain.Close()
	if ip == nil {
		if rerr != nil {
			o.st.fail("init", rerr)
			why += "; " + rerr.Error()
		}
		return why, false
	}
	o.init = ip
	o.st.ok("init", "runner-inner handed over the sandbox's init")
	return "", true
}

// finish appends the sentinel and closes the journal.
func (o *outerRun) finish(s journal.Sentinel) error {
	if o.stderr != nil {
		defer o.stderr.Close()
	}
	if err := o.jw.Finish(s); err != nil {
		o.st.fail("finish", err)
		return fmt.Errorf("runner-outer: %w", err)
	}
	o.st.ok("finish", fmt.Sprintf("exit %d reason %s signal %q", s.Exit, s.Reason, s.Signal))
	return nil
}

// request asks the sandbox's init to send sig to the agent's process
// group; a request made before the init runs waits in the pipe.
func (o *outerRun) request(sig syscall.Signal) error {
	_, err := fmt.Fprintln(o.ctl, signalName(sig))
	return err
}

// killChain kills what runs of the chain: runner-inner if it has not
// exited yet, and the sandbox's init, whose death (as pid 1) kills every
// process of its pid namespace. Closing the control pipe ends an init
// whose pidfd never arrived.
func (o *outerRun) killChain(inner *innerProc) {
	if inner != nil {
		_ = inner.cmd.Process.Kill()
	}
	if o.init != nil {
		_ = unix.PidfdSendSignal(int(o.init.fd.Fd()), unix.SIGKILL, nil, 0)
	}
	o.ctl.Close()
}

// initUnreported is the status of an init that ended without a (valid)
// status line: the agent's fate is unknown, so the run is an error, with
// the signal that killed the init if one did.
func initUnreported(r statusRead, ws syscall.WaitStatus, how string) statusRead {
	if r.err != nil {
		return statusRead{status: &chainStatus{Exit: 1, Error: fmt.Sprintf("runner-inner-child (%s) reported garbage: %v", how, r.err)}}
	}
	res := chainStatus{Exit: 1}
	if ws.Signaled() {
		res = statusOf(ws)
	}
	res.Error = "the sandbox's init (runner-inner-child) ended without reporting: " + how + "; see stderr.log and state.ndjson"
	return statusRead{status: &res}
}

// statusRead is what the status pipe held when the chain closed it.
type statusRead struct {
	status *chainStatus // nil when nothing was reported
	err    error
}

// readChainStatus reads the one status line of the chain: runner-inner's
// when it could not start the sandbox, else the sandbox init's. Empty
// means neither reported.
func readChainStatus(r io.ReadCloser) statusRead {
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxStatusLine+1))
	if err != nil {
		return statusRead{err: fmt.Errorf("read the chain's status: %w", err)}
	}
	if len(b) == 0 {
		return statusRead{}
	}
	c, err := parseStatus(b)
	if err != nil {
		return statusRead{err: err}
	}
	return statusRead{status: &c}
}

// describeWait says how a process ended, from its wait status.
func describeWait(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by SIG" + signalName(ws.Signal())
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}

// describeExit says how a stage of the chain ended.
func describeExit(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			return describeWait(ws)
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// readBounded reads a stage's spec, an inherited descriptor's path.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	return chain.ReadFile(f, path)
}

// secretNames are the names and hosts of secrets, never their values or
// placeholders.
func secretNames(secrets []runspec.Secret) map[string][]string {
	out := make(map[string][]string, len(secrets))
	for _, s := range secrets {
		out[s.Name] = s.Hosts
	}
	return out
}

// specSummary is the spec for state.ndjson, secrets redacted.
func specSummary(s runspec.Spec) string {
	uid, gid := s.SandboxIDs(os.Geteuid(), os.Getegid())
	deadline := "none"
	if !s.Deadline.IsZero() {
		deadline = s.Deadline.UTC().Format(time.RFC3339Nano)
	}
	auid, agid := s.AgentIDs()
	return string(chain.MustJSON(map[string]any{
		"runId":     s.RunID,
		"argv":      s.Argv,
		"env":       redactEnv(s.Env),
		"files":     len(s.Files),
		"workspace": s.Workspace,
		"deadline":  deadline,
		"killGrace": s.Grace().String(),
		"network":   chain.NetMode(s.Network),
		"allow":     s.Network.Allow,
		"secrets":   secretNames(s.Network.Secrets),
		"mounts":    s.Mounts,
		"limits":    s.Limits,
		"cgroup":    s.CgroupParent,
		"uid":       uid,
		"gid":       gid,
		"agentUid":  auid,
		"agentGid":  agid,
	}))
}
