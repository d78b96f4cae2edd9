package stage

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/pidfd"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

// sandboxHostname is the agent's host name.
const sandboxHostname = "baton"

// Descriptors of the exec stage.
const (
	fdExecSpec = 3 // its spec (a sealed memfd)
	fdExecErr  = 4 // why it could not exec the agent; closed by a good exec
)

// RunInnerChild is `baton runner-inner-child --spec PATH`, pid 1 of the
// sandbox's pid namespace and uid 0 of its user namespace (the sandbox
// uid on the host); PATH is its spec (fd 4), which holds no nonce. It
// builds the agent's root on a tmpfs: the system directories bound
// read-only, a generated /etc with the host's CA certificates, a minimal
// /dev with a devpts of its own, a /proc of its pid namespace with the
// kernel's knobs read-only and host internals masked, a private /tmp, the
// workspace read-write, the profile's mounts, and the baton binary when
// the agent is baton; it pivots into it, detaches the host's root and
// makes / read-only. It then execs the wait stage (RunInitWait), which
// starts the agent through the exec stage (`runner-exec`) in the
// workspace, in its own process group and user namespace as the agent
// uid, with stdio inherited and no other descriptor. As init it reaps
// every orphan and passes runner-outer's stop requests (fd 6) to the
// agent's process group; it takes no signal but SIGCHLD, so the agent,
// which shares its host uid, cannot stop it. When the agent ends it
// writes the agent's status on fd 3 and exits, which kills whatever is
// left in the namespace. Cancelling ctx acts as a stop request.
func RunInnerChild(ctx context.Context, specPath string) error {
	return asInit(ctx, chain.StageInnerChild, true, func(st *state, sigs <-chan os.Signal, stops *stopReader) chainStatus {
		return runChild(ctx, specPath, st, sigs, stops)
	})
}

// asInit runs body as the sandbox's init and reports the status it
// returns: on fd 3, and in state.ndjson (fd 5) as its last record. With
// chld, body gets SIGCHLD on sigs to reap by; without, SIGCHLD stays
// ignored, so the kernel reaps every child at its exit, and sigs is nil.
func asInit(ctx context.Context, stage string, chld bool, body func(*state, <-chan os.Signal, *stopReader) chainStatus) error {
	report := os.NewFile(fdStatus, "status")
	// The agent inherits stdio only: not the status pipe, the spec, the
	// state file or the control pipe.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("%s: mark descriptors close-on-exec: %w", stage, err)
	}
	// Init of a pid namespace gets, from inside it, only the signals it
	// handles: ignoring all but SIGCHLD leaves the agent nothing to send.
	signal.Ignore()
	var sigs chan os.Signal
	if chld {
		sigs = make(chan os.Signal, 16)
		signal.Notify(sigs, unix.SIGCHLD)
		defer signal.Stop(sigs)
	}
	st := stateOn(os.NewFile(fdState, "state"), "inner-child")
	defer st.close()
	// Non-blocking, so the runtime's poller waits on it, not a thread.
	if err := unix.SetNonblock(fdControl, true); err != nil {
		return fmt.Errorf("%s: control pipe: %w", stage, err)
	}
	res := body(st, sigs, readStops(os.NewFile(fdControl, "control")))
	st.ok("report", fmt.Sprintf("exit %d signal %q", res.Exit, res.Signal))
	if _, err := report.Write(res.line()); err != nil {
		return fmt.Errorf("%s: report status: %w", stage, err)
	}
	return nil
}

// stopReader delivers the signals runner-outer asks to send the agent
// (on C), and a prestarted chain's take (on T). The pipe's end means
// runner-outer is gone (or killed the sandbox): the init then exits,
// which kills everything in its pid namespace, so no agent runs
// unjournaled.
type stopReader struct {
	C    <-chan syscall.Signal
	T    <-chan takeRead
	ctl  *os.File
	done chan struct{}
}

// takeRead is a take line as read: the take, or why it is none.
type takeRead struct {
	take chain.AgentTake
	err  error
}

func readStops(ctl *os.File) *stopReader {
	ch := make(chan syscall.Signal, 4)
	tk := make(chan takeRead, 1)
	r := &stopReader{C: ch, T: tk, ctl: ctl, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(io.LimitReader(ctl, 1<<20+chain.MaxTakeLine))
		sc.Buffer(nil, chain.MaxTakeLine)
		for sc.Scan() {
			if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(chain.TakeWord+" ")); ok {
				t, err := chain.ParseTake(rest)
				select {
				case tk <- takeRead{take: t, err: err}:
				default: // one take per chain; runner-outer sends no second
				}
				continue
			}
			if sig, ok := signalNumber(sc.Text()); ok && (sig == unix.SIGTERM || sig == unix.SIGINT) {
				ch <- sig
			}
		}
		if errors.Is(sc.Err(), os.ErrDeadlineExceeded) {
			close(r.done) // halted
			return
		}
		os.Exit(1)
	}()
	return r
}

// halt stops reading, leaving the pipe to whoever reads it next, and
// returns the stops read but not yet taken, and the take if one was read:
// a line is read whole (each is one write) and delivered before the
// reader halts.
func (r *stopReader) halt() ([]syscall.Signal, *takeRead, error) {
	if err := r.ctl.SetReadDeadline(time.Now()); err != nil {
		return nil, nil, fmt.Errorf("halt the stop reader: %w", err)
	}
	var pending []syscall.Signal
	var take *takeRead
	for {
		select {
		case sig := <-r.C:
			pending = append(pending, sig)
		case t := <-r.T:
			take = &t
		case <-r.done:
			for {
				select {
				case sig := <-r.C:
					pending = append(pending, sig)
				case t := <-r.T:
					take = &t
				default:
					return pending, take, r.ctl.SetReadDeadline(time.Time{})
				}
			}
		}
	}
}

func runChild(ctx context.Context, specPath string, st *state, sigs <-chan os.Signal, stops *stopReader) chainStatus {
	b, err := readBounded(specPath)
	if err != nil {
		return setupFailed(st, "spec", err)
	}
	spec, err := decodeChildSpec(b)
	if err != nil {
		return setupFailed(st, "spec", err)
	}
	// The exec stage is this binary; keep it for after the pivot.
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return setupFailed(st, "binary", err)
	}
	defer exe.Close()
	workspace := runspec.WorkspacePath
	// Every setup error is a fail record naming its phase and the run's
	// status: a step records its own; an error that did not come through
	// one is recorded as the setup's.
	var failed *chainStatus
	step := func(phase string, do func() (string, error)) error {
		detail, err := do()
		if err != nil {
			res := setupFailed(st, phase, err)
			failed = &res
			return err
		}
		st.ok(phase, detail)
		return nil
	}
	fail := func(err error) chainStatus {
		if failed != nil {
			return *failed
		}
		return setupFailed(st, "setup", err)
	}
	if err := step("mount-private", func() (string, error) {
		// Nothing mounted here propagates to the host.
		return "", unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	}); err != nil {
		return fail(err)
	}
	rb := &rootBuilder{spec: spec}
	if err := rb.build(workspace, step); err != nil {
		return fail(err)
	}
	if err := step("pivot-root", func() (string, error) { return "old root detached, / read-only", pivot(workspace) }); err != nil {
		return fail(err)
	}
	if err := step("hostname", func() (string, error) { return sandboxHostname, unix.Sethostname([]byte(sandboxHostname)) }); err != nil {
		return fail(err)
	}
	return runAgent(ctx, spec, workspace, exe, st, sigs, stops)
}

// setupFailed is the status of a sandbox that could not be set up.
func setupFailed(st *state, phase string, err error) chainStatus {
	err = fmt.Errorf("sandbox setup (%s): %w", phase, err)
	st.fail(phase, err)
	return chainStatus{Exit: 1, Error: err.Error()}
}

// loopbackUp sets IFF_UP on lo, the only interface of a new net namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

// runAgent hands the agent's start and the wait for it to a fresh
// process: it execs the wait stage (`runner-init-wait`, RunInitWait),
// which keeps pid 1, its children, namespaces, credentials and the
// descriptors it passes, but not the heap and threads the setup left behind
// (docs/benchmarks-log.md, "Where the floor is"). The exec comes before the
// agent starts: until the wait stage has ignored every signal again, the
// runtime's handlers would let the agent stop its init. If the exec
// fails, the init does the same in-process.
//
// A prestarted chain's init (spec.Pooled) does the same before its take:
// the wait stage then waits for the take on the control pipe, and
// resolves and starts the agent it names.
func runAgent(ctx context.Context, spec childSpec, ws string, exe *os.File, st *state, sigs <-chan os.Signal, stops *stopReader) chainStatus {
	w := waitSpec{AgentUID: spec.AgentUID, AgentGID: spec.AgentGID, Dir: ws, Home: defaultHome(spec.Home), Exe: int(exe.Fd()), ExecSpec: -1}
	if spec.Pooled {
		w.Pooled, w.Rlimits = true, spec.Rlimits
	} else {
		b, res, ok := resolveAgent(spec.Argv, spec.Env, ws, w.Home, spec.Rlimits, spec.Git, st)
		if !ok {
			return res
		}
		f, err := sealedFile("baton-exec-spec", b)
		if err != nil {
			st.fail("start-agent", err)
			return chainStatus{Exit: 126, Error: err.Error()}
		}
		defer f.Close()
		w.ExecSpec = int(f.Fd())
	}
	pending, take, err := stops.halt()
	if take != nil && take.err != nil {
		return setupFailed(st, "take", take.err)
	}
	if take != nil {
		w.Take = &take.take
	}
	if err == nil {
		for _, sig := range pending {
			w.Stops = append(w.Stops, int(sig))
		}
		err = execWaitStage(w)
		stops = readStops(stops.ctl)
	}
	// Still here: the wait stage did not start; its descriptors are
	// close-on-exec again.
	st.fail("wait-stage", err)
	return superviseAgent(ctx, w, st, sigs, stops)
}

// resolveAgent finds the agent argv names on env's PATH, from the
// workspace ws (its HOME home unless env sets one), and returns the exec
// stage's spec, which clones git into the workspace first when it is set.
func resolveAgent(argv, env []string, ws, home string, rlimits []rlimit, git *runspec.Git, st *state) ([]byte, chainStatus, bool) {
	env = agentEnv(env, ws, home)
	path, err := lookPath(argv[0], env, ws)
	if err != nil {
		st.fail("resolve-agent", err)
		return nil, chainStatus{Exit: startExitCode(err), Error: err.Error()}, false
	}
	st.ok("resolve-agent", path)
	return chain.MustJSON(execSpec{Path: path, Argv: argv, Env: env, Dir: ws, Rlimits: rlimits, Git: git}), chainStatus{}, true
}

// waitSpec is what the wait stage needs to start the agent and wait for
// it: the exec stage's spec aside, which it passes on unread.
type waitSpec struct {
	AgentUID int    `json:"agentUid"`
	AgentGID int    `json:"agentGid"`
	Dir      string `json:"dir"`
	Home     string `json:"home"`            // HOME unless the agent's environment sets one
	Exe      int    `json:"exe"`             // descriptor of the runner binary
	ExecSpec int    `json:"execSpec"`        // descriptor of the exec stage's spec; -1 until a pooled chain's take
	Stops    []int  `json:"stops,omitempty"` // read by the init before the exec
	// Pooled: the agent is the take's (on the control pipe, or Take if
	// the init read it before the exec), started with Rlimits.
	Pooled  bool             `json:"pooled,omitempty"`
	Rlimits []rlimit         `json:"rlimits,omitempty"`
	Take    *chain.AgentTake `json:"take,omitempty"`
}

// execWaitStage execs this binary as the wait stage, passing it the
// status pipe, the state file, the control pipe, w's descriptors and w
// itself, and returns only if that failed, with every descriptor from 3
// up close-on-exec again.
func execWaitStage(w waitSpec) error {
	specFile, err := sealedFile("baton-wait-spec", chain.MustJSON(w))
	if err != nil {
		return err
	}
	defer specFile.Close()
	defer unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err := passOnExec(fdStatus, fdState, fdControl, w.Exe, w.ExecSpec, int(specFile.Fd())); err != nil {
		return err
	}
	err = syscall.Exec("/proc/self/fd/"+strconv.Itoa(w.Exe),
		[]string{"baton", chain.StageInitWait, "--spec", "/proc/self/fd/" + strconv.Itoa(int(specFile.Fd()))}, chain.StageEnv)
	return fmt.Errorf("exec the wait stage: %w", err)
}

// passOnExec clears close-on-exec on fds, skipping negative ones (none),
// so that the image a stage execs keeps them under the same numbers.
func passOnExec(fds ...int) error {
	for _, fd := range fds {
		if fd < 0 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("pass descriptors: %w", err)
		}
	}
	return nil
}

// RunInitWait is `baton runner-init-wait --spec PATH`: the sandbox's
// init once runner-inner-child has set the sandbox up and exec'd it, pid
// 1 still. It starts the agent through the exec stage, forwards stops,
// reaps, and reports the agent's status as runner-inner-child would have.
//
// It reaps on SIGCHLD: the agent stays a zombie until the init's wait4,
// which gives its status and its resource use (CPU time, peak memory:
// the run's usage), and orphans are reaped as they end. That costs the
// init os/signal, whose receiving goroutine keeps a thread blocked, and
// another spare (about 60 KiB per run, docs/benchmarks-log.md).
//
// Built with initReap=kernel, on a kernel that keeps a reaped process's
// exit status for its pidfd (PIDFD_INFO_EXIT, Linux 6.15), it spares
// them: it leaves SIGCHLD ignored, so the kernel reaps every child,
// orphans included, at its exit, and the agent's status comes from its
// pidfd, which the runtime's poller waits on. The kernel then keeps no
// resource use of the agent for anyone, so its runs' usage has no CPU
// time or peak memory.
func RunInitWait(ctx context.Context, specPath string) error {
	return asInit(ctx, chain.StageInitWait, initReap != "kernel" || !exitInfo(), func(st *state, sigs <-chan os.Signal, stops *stopReader) chainStatus {
		b, err := readBounded(specPath)
		if err != nil {
			return setupFailed(st, "wait-spec", err)
		}
		var w waitSpec
		if err := runspec.DecodeStrict(b, &w); err != nil {
			return setupFailed(st, "wait-spec", err)
		}
		return superviseAgent(ctx, w, st, sigs, stops)
	})
}

// superviseAgent starts the agent through the exec stage and, as the
// namespace's init, reaps every process until the agent has ended: on
// SIGCHLD (sigs), or, with sigs nil, through the kernel (SIGCHLD is
// ignored), the agent's end coming from its pidfd.
//
// A prestarted chain's wait stage starts the exec stage before its take:
// the stage does all it can without its spec (its start, the seccomp
// filter's build, the capabilities' drop) and waits for the spec on a
// pipe, which the init writes once the take has named the agent.
func superviseAgent(ctx context.Context, w waitSpec, st *state, sigs <-chan os.Signal, stops *stopReader) chainStatus {
	stage, res, ok := startAgent(ctx, w, st, stops)
	if !ok {
		return res
	}
	pid, pidfd := stage.pid, stage.pidfd
	st.ok("start-agent", fmt.Sprintf("pid %d, uid %d, gid %d", pid, w.AgentUID, w.AgentGID))
	for _, sig := range w.Stops {
		forward(pid, syscall.Signal(sig))
	}
	var exited <-chan agentEnd
	if sigs == nil {
		var err error
		if exited, err = watchExit(pidfd); err != nil {
			// The agent runs unwatched: stop it, and say why.
			forward(pid, unix.SIGKILL)
			st.fail("agent-exit", err)
			return chainStatus{Exit: 1, Error: err.Error()}
		}
	} else {
		unix.Close(pidfd)
	}
	ctxDone := ctx.Done()
	for {
		if sigs != nil {
			if ws, ru, ok := reap(pid); ok {
				exited = endedWith(ws, ru)
			}
		}
		select {
		case end := <-exited:
			if !end.known {
				err := errors.New("the agent ended, and the kernel recorded no exit status for it")
				st.fail("agent-exit", err)
				return chainStatus{Exit: 1, Error: err.Error()}
			}
			res := statusOf(end.ws)
			if end.ru != nil {
				res = res.withUsage(end.ru)
			}
			st.ok("agent-exit", fmt.Sprintf("exit %d signal %q, cpu %dus user %dus system, max rss %d bytes",
				res.Exit, res.Signal, res.CPUUserUsec, res.CPUSystemUsec, res.MaxRSS))
			return res
		case <-sigs:
		case sig := <-stops.C:
			forward(pid, sig)
		case <-ctxDone:
			ctxDone = nil
			forward(pid, unix.SIGTERM)
		}
	}
}

// startAgent starts the agent through the exec stage, and returns the
// stage once the agent runs: at once, or, for a prestarted chain, once
// its take has named the agent. false: no agent runs, and the status says
// why (its record written).
func startAgent(ctx context.Context, w waitSpec, st *state, stops *stopReader) (*execStage, chainStatus, bool) {
	failed := func(err error) (*execStage, chainStatus, bool) {
		st.fail("start-agent", err)
		return nil, chainStatus{Exit: 126, Error: err.Error()}, false
	}
	started := func(stage *execStage) (*execStage, chainStatus, bool) {
		commit, err := stage.started()
		if commit != "" {
			st.ok(chain.GitClonePhase, commit)
		}
		if err != nil {
			return failed(err)
		}
		return stage, chainStatus{}, true
	}
	if !w.Pooled || w.ExecSpec >= 0 {
		stage, err := spawnExecStage(w)
		if err != nil {
			return failed(err)
		}
		return started(stage)
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return failed(err)
	}
	defer specW.Close()
	w.ExecSpec = int(specR.Fd())
	stage, err := spawnExecStage(w)
	specR.Close()
	if err != nil {
		return failed(err)
	}
	st.ok(chain.PoolWaitPhase, fmt.Sprintf("pid %d, waiting for the take", stage.pid))
	t, res, ok := awaitTake(ctx, w.Take, st, stops)
	var spec []byte
	if ok {
		spec, res, ok = resolveAgent(t.Argv, t.Env, w.Dir, w.Home, w.Rlimits, nil, st)
	}
	if !ok {
		stage.kill()
		return nil, res, false
	}
	if _, err := specW.Write(spec); err != nil {
		stage.kill()
		return failed(fmt.Errorf("hand the exec stage its spec: %w", err))
	}
	specW.Close()
	return started(stage)
}

// awaitTake waits for a prestarted chain's take, unless the init read it
// already (read). runner-outer ends a chain stopped before its take
// itself; a stop that reaches the init first ends it all the same.
func awaitTake(ctx context.Context, read *chain.AgentTake, st *state, stops *stopReader) (chain.AgentTake, chainStatus, bool) {
	if read != nil {
		st.ok("take", "")
		return *read, chainStatus{}, true
	}
	select {
	case t := <-stops.T:
		if t.err != nil {
			return chain.AgentTake{}, setupFailed(st, "take", t.err), false
		}
		st.ok("take", "")
		return t.take, chainStatus{}, true
	case sig := <-stops.C:
		return chain.AgentTake{}, setupFailed(st, "take", fmt.Errorf("stopped (SIG%s) before its take", signalName(sig))), false
	case <-ctx.Done():
		return chain.AgentTake{}, setupFailed(st, "take", ctx.Err()), false
	}
}

// agentEnd is how the agent ended: its wait status, if known, and its
// resource use, if its wait4 reported it.
type agentEnd struct {
	ws    syscall.WaitStatus
	ru    *syscall.Rusage
	known bool
}

// endedWith is a channel that delivers ws and ru.
func endedWith(ws syscall.WaitStatus, ru *syscall.Rusage) <-chan agentEnd {
	ch := make(chan agentEnd, 1)
	ch <- agentEnd{ws: ws, ru: ru, known: true}
	return ch
}

// initReap, set to "kernel" at link time (-X), makes the wait stage leave
// reaping to the kernel where it can (see RunInitWait).
var initReap string

// exitInfo reports whether the kernel keeps a reaped process's exit
// status for its pidfd (PIDFD_INFO_EXIT): Linux 6.15 and later.
func exitInfo() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 6, 15)
}

// watchExit returns a channel that delivers how the process of pidfd fd
// (which it takes) ended, once it has exited and the kernel has reaped it.
func watchExit(fd int) (<-chan agentEnd, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch the agent: %w", err)
	}
	f := os.NewFile(uintptr(fd), "agent-pidfd")
	ch := make(chan agentEnd, 1)
	err := pidfd.Watch(context.Background(), f, func(bool) {
		defer f.Close()
		ws, ok := exitStatus(f)
		ch <- agentEnd{ws: ws, known: ok}
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("watch the agent: %w", err)
	}
	return ch, nil
}

// exitWait bounds how long exitStatus waits for the kernel to record the
// exit status of a process whose pidfd says it exited.
const exitWait = time.Second

// exitStatus reads the exit status of the exited process of pidfd f. The
// pidfd wakes its poller when the process exits, and the kernel records
// the status when it reaps it, just after: a read between the two finds
// none yet (1 in 2,000 exits on an idle machine here; three runs of a
// loaded chaos soak were taken for killed by it), so it reads again, 1 ms
// apart, for up to exitWait. false: no status came.
func exitStatus(f *os.File) (syscall.WaitStatus, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	for deadline := time.Now().Add(exitWait); ; {
		info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_EXIT}
		err := errors.New("no exit status")
		_ = rc.Control(func(fd uintptr) { err = unix.IoctlPidfdInfo(int(fd), &info) })
		if err == nil && info.Mask&unix.PIDFD_INFO_EXIT != 0 {
			return syscall.WaitStatus(info.Exit_code), true
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		time.Sleep(time.Millisecond)
	}
}

// execStage is a started exec stage, which becomes the agent: its pid,
// its pidfd, and the pipe on which it says why it could not exec.
type execStage struct {
	pid, pidfd int
	errR       *os.File
}

// spawnExecStage starts `runner-exec` (w.Exe) with its spec (w.ExecSpec)
// as the agent: in a user namespace of its own where it is the agent uid
// (mapped to this namespace's 0), holding CAP_SETPCAP only as long as it
// takes to empty its bounding set.
func spawnExecStage(w waitSpec) (*execStage, error) {
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pidfd := -1
	pid, err := syscall.ForkExec("/proc/self/fd/"+strconv.Itoa(w.Exe),
		[]string{"baton", chain.StageExec, "--spec", "/proc/self/fd/" + strconv.Itoa(fdExecSpec)},
		&syscall.ProcAttr{
			Dir:   w.Dir,
			Env:   chain.StageEnv,
			Files: []uintptr{0, 1, 2, uintptr(w.ExecSpec), errW.Fd()},
			Sys: &syscall.SysProcAttr{
				Setpgid:                    true,
				Cloneflags:                 syscall.CLONE_NEWUSER,
				UidMappings:                []syscall.SysProcIDMap{{ContainerID: w.AgentUID, HostID: 0, Size: 1}},
				GidMappings:                []syscall.SysProcIDMap{{ContainerID: w.AgentGID, HostID: 0, Size: 1}},
				GidMappingsEnableSetgroups: false,
				AmbientCaps:                []uintptr{unix.CAP_SETPCAP},
				PidFD:                      &pidfd,
			},
		})
	errW.Close()
	if err != nil {
		errR.Close()
		return nil, fmt.Errorf("start the exec stage: %w", err)
	}
	return &execStage{pid: pid, pidfd: pidfd, errR: errR}, nil
}

// started returns once the agent runs, or with why the exec stage could
// not start it; in that case the stage has been reaped. commit is the
// commit the stage cloned into the workspace, if it cloned one: it
// says so on the pipe before the agent exists (gitClonedNote).
func (e *execStage) started() (commit string, err error) {
	defer e.errR.Close()
	msg, _ := io.ReadAll(io.LimitReader(e.errR, 4096))
	if rest, ok := bytes.CutPrefix(msg, []byte(gitClonedNote)); ok {
		id, after, _ := bytes.Cut(rest, []byte("\n"))
		if runspec.IsCommitID(string(id)) {
			commit, msg = string(id), after
		}
	}
	if len(msg) == 0 {
		return commit, nil // the pipe closed on exec: the agent runs
	}
	e.reap()
	return commit, errors.New(strings.TrimSpace(string(msg)))
}

// kill ends a stage that will not start an agent.
func (e *execStage) kill() {
	_ = unix.PidfdSendSignal(e.pidfd, unix.SIGKILL, nil, 0)
	e.errR.Close()
	e.reap()
}

func (e *execStage) reap() {
	unix.Close(e.pidfd)
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(e.pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
}

// reap collects every ended child, reporting the agent's wait status and
// resource use once it is among them.
func reap(agent int) (syscall.WaitStatus, *syscall.Rusage, bool) {
	for {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, &ru)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return 0, nil, false
		}
		if pid == agent {
			return ws, &ru, true
		}
	}
}

// forward sends sig to the agent's process group, or to the agent alone
// if it left its group.
func forward(agent int, sig syscall.Signal) {
	if err := unix.Kill(-agent, sig); err == unix.ESRCH {
		_ = unix.Kill(agent, sig)
	}
}
