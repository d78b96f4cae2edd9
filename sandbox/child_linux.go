package sandbox

import (
	"bufio"
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

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
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
// makes / read-only. It then starts the agent through the exec stage
// (`runner-exec`) in the workspace, in its own process group and user
// namespace as the agent uid, with stdio inherited and no other
// descriptor. As init it reaps every orphan and passes runner-outer's
// stop requests (fd 6) to the agent's process group; it takes no signal
// but SIGCHLD, so the agent, which shares its host uid, cannot stop it.
// When the agent ends it writes the agent's status on fd 3 and exits,
// which kills whatever is left in the namespace. Cancelling ctx acts as a
// stop request.
func RunInnerChild(ctx context.Context, specPath string) error {
	report := os.NewFile(fdStatus, "status")
	// The agent inherits stdio only: not the status pipe, the spec, the
	// state file or the control pipe.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("runner-inner-child: mark descriptors close-on-exec: %w", err)
	}
	// Init of a pid namespace gets, from inside it, only the signals it
	// handles: ignoring all but SIGCHLD leaves the agent nothing to send.
	signal.Ignore()
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGCHLD)
	defer signal.Stop(sigs)
	st := stateOn(os.NewFile(fdState, "state"), "inner-child")
	defer st.close()
	// Non-blocking, so the runtime's poller waits on it, not a thread.
	if err := unix.SetNonblock(fdControl, true); err != nil {
		return fmt.Errorf("runner-inner-child: control pipe: %w", err)
	}
	stops := readStops(os.NewFile(fdControl, "control"))
	res := runChild(ctx, specPath, st, sigs, stops)
	st.ok("report", fmt.Sprintf("exit %d signal %q", res.Exit, res.Signal))
	if _, err := report.Write(res.line()); err != nil {
		return fmt.Errorf("runner-inner-child: report status: %w", err)
	}
	return nil
}

// readStops delivers the signals runner-outer asks to send the agent.
// The pipe's end means runner-outer is gone (or killed the sandbox): the
// init then exits, which kills everything in its pid namespace, so no
// agent runs unjournaled.
func readStops(ctl *os.File) <-chan syscall.Signal {
	ch := make(chan syscall.Signal, 4)
	go func() {
		sc := bufio.NewScanner(io.LimitReader(ctl, 1<<20))
		for sc.Scan() {
			if sig, ok := signalNumber(sc.Text()); ok && (sig == unix.SIGTERM || sig == unix.SIGINT) {
				ch <- sig
			}
		}
		os.Exit(1)
	}()
	return ch
}

func runChild(ctx context.Context, specPath string, st *state, sigs <-chan os.Signal, stops <-chan syscall.Signal) chainStatus {
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
	workspace := journal.Dir(spec.RunDir).Workspace()
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

// runAgent starts the agent through the exec stage and, as the
// namespace's init, reaps every process until the agent has ended.
func runAgent(ctx context.Context, spec childSpec, ws string, exe *os.File, st *state, sigs <-chan os.Signal, stops <-chan syscall.Signal) chainStatus {
	env := agentEnv(spec.Env, ws)
	path, err := lookPath(spec.Argv[0], env, ws)
	if err != nil {
		st.fail("resolve-agent", err)
		return chainStatus{Exit: startExitCode(err), Error: err.Error()}
	}
	st.ok("resolve-agent", path)
	pid, err := startExecStage(spec, execSpec{Path: path, Argv: spec.Argv, Env: env, Dir: ws, Rlimits: spec.Rlimits}, exe)
	if err != nil {
		st.fail("start-agent", err)
		return chainStatus{Exit: 126, Error: err.Error()}
	}
	st.ok("start-agent", fmt.Sprintf("pid %d, uid %d, gid %d", pid, spec.AgentUID, spec.AgentGID))
	ctxDone := ctx.Done()
	for {
		if ws, ok := reap(pid); ok {
			res := statusOf(ws)
			st.ok("agent-exit", fmt.Sprintf("exit %d signal %q", res.Exit, res.Signal))
			return res
		}
		select {
		case <-sigs:
		case sig := <-stops:
			forward(pid, sig)
		case <-ctxDone:
			ctxDone = nil
			forward(pid, unix.SIGTERM)
		}
	}
}

// startExecStage starts `runner-exec` as the agent: in a user namespace
// of its own where it is the agent uid (mapped to this namespace's 0),
// holding CAP_SETPCAP only as long as it takes to empty its bounding set.
// It returns once the agent runs, or with why the exec stage could not
// start it; in that case the stage has been reaped.
func startExecStage(spec childSpec, es execSpec, exe *os.File) (int, error) {
	specFile, err := sealedFile("baton-exec-spec", mustJSON(es))
	if err != nil {
		return 0, err
	}
	defer specFile.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer errR.Close()
	pid, err := syscall.ForkExec("/proc/self/fd/"+strconv.Itoa(int(exe.Fd())),
		[]string{"baton", "runner-exec", "--spec", "/proc/self/fd/" + strconv.Itoa(fdExecSpec)},
		&syscall.ProcAttr{
			Dir:   es.Dir,
			Env:   stageEnv,
			Files: []uintptr{0, 1, 2, specFile.Fd(), errW.Fd()},
			Sys: &syscall.SysProcAttr{
				Setpgid:                    true,
				Cloneflags:                 syscall.CLONE_NEWUSER,
				UidMappings:                []syscall.SysProcIDMap{{ContainerID: spec.AgentUID, HostID: 0, Size: 1}},
				GidMappings:                []syscall.SysProcIDMap{{ContainerID: spec.AgentGID, HostID: 0, Size: 1}},
				GidMappingsEnableSetgroups: false,
				AmbientCaps:                []uintptr{unix.CAP_SETPCAP},
			},
		})
	errW.Close()
	if err != nil {
		return 0, fmt.Errorf("start the exec stage: %w", err)
	}
	msg, _ := io.ReadAll(io.LimitReader(errR, 4096))
	if len(msg) == 0 {
		return pid, nil // the pipe closed on exec: the agent runs
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	return 0, errors.New(strings.TrimSpace(string(msg)))
}

// reap collects every ended child, reporting the agent's wait status
// once it is among them.
func reap(agent int) (syscall.WaitStatus, bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return 0, false
		}
		if pid == agent {
			return ws, true
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
