package sandbox

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// sandboxHostname is the agent's host name.
const sandboxHostname = "baton"

// AgentUID and AgentGID are the agent's ids inside the sandbox. The agent
// runs in a user namespace of its own, nested in the sandbox's, where it
// is this unprivileged id (mapped to the sandbox's 0, which is the sandbox
// uid on the host): it holds no capability in the sandbox's namespace, so
// it cannot unmount what hides the run directories, nor ptrace its init or
// open the init's descriptors (the status pipe) through /proc/1/fd; and it
// is not root, which some agent CLIs refuse to run as.
const (
	AgentUID = 1000
	AgentGID = 1000
)

// RunInnerChild is `baton runner-inner-child --spec PATH`, pid 1 of the
// sandbox's pid namespace and uid 0 of its user namespace (the sandbox
// uid on the host). Its spec (PATH is its fd 4) holds no nonce. It makes
// its mounts private, covers the node's run directories with a tmpfs
// that shows only the workspace, mounts a /proc of its own pid
// namespace, brings loopback up, names the host "baton", and runs the
// agent in the workspace, in its own process group and user namespace
// (as AgentUID), with stdio inherited and no other descriptor. As init it
// reaps every orphan and forwards SIGTERM and SIGINT to the agent's
// process group. When the agent ends it writes the agent's status on fd 3
// and exits, which kills whatever is left in the namespace. Cancelling
// ctx acts as SIGTERM.
func RunInnerChild(ctx context.Context, specPath string) error {
	report := os.NewFile(fdStatus, "status")
	// The agent inherits stdio only: not the status pipe, the spec or the
	// state file.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("runner-inner-child: mark descriptors close-on-exec: %w", err)
	}
	// Subscribed first, so no stop request or SIGCHLD is missed: pid 1
	// gets only the signals it handles.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT)
	defer signal.Stop(sigs)
	st := stateOn(os.NewFile(fdState, "state"), "inner-child")
	defer st.close()
	res := runChild(ctx, specPath, st, sigs)
	st.ok("report", fmt.Sprintf("exit %d signal %q", res.Exit, res.Signal))
	if _, err := report.Write(res.line()); err != nil {
		return fmt.Errorf("runner-inner-child: report status: %w", err)
	}
	return nil
}

func runChild(ctx context.Context, specPath string, st *state, sigs <-chan os.Signal) chainStatus {
	b, err := readBounded(specPath)
	if err != nil {
		return setupFailed(st, "spec", err)
	}
	spec, err := decodeChildSpec(b)
	if err != nil {
		return setupFailed(st, "spec", err)
	}
	steps := []struct {
		phase string
		do    func() (string, error)
	}{
		{"mount-private", func() (string, error) {
			// Nothing mounted here propagates to the host.
			return "", unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
		}},
		{"hide-run-dirs", func() (string, error) { return exposeWorkspace(spec.RunDir) }},
		{"mount-proc", func() (string, error) {
			// /proc of this pid namespace: the agent sees no host process.
			return "", unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"loopback-up", func() (string, error) { return "", loopbackUp() }},
		{"hostname", func() (string, error) { return sandboxHostname, unix.Sethostname([]byte(sandboxHostname)) }},
	}
	for _, s := range steps {
		detail, err := s.do()
		if err != nil {
			return setupFailed(st, s.phase, err)
		}
		st.ok(s.phase, detail)
	}
	return runAgent(ctx, spec, st, sigs)
}

// setupFailed is the status of a sandbox that could not be set up.
func setupFailed(st *state, phase string, err error) chainStatus {
	err = fmt.Errorf("sandbox setup (%s): %w", phase, err)
	st.fail(phase, err)
	return chainStatus{Exit: 1, Error: err.Error()}
}

// exposeWorkspace covers hiddenTop with a tmpfs holding only the
// workspace's path, and binds the workspace (the cwd runner-inner gave
// this process) there, so it keeps its host path.
func exposeWorkspace(runDir string) (string, error) {
	ws := filepath.Join(runDir, "workspace")
	top := hiddenTop(runDir, func(p string) bool { return unix.Access(p, unix.X_OK) == nil })
	if err := unix.Mount("tmpfs", top, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return "", fmt.Errorf("tmpfs on %s: %w", top, err)
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount(".", ws, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return "", fmt.Errorf("bind the workspace: %w", err)
	}
	if err := os.Chdir(ws); err != nil {
		return "", err
	}
	return "tmpfs on " + top + ", workspace bound at " + ws, nil
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

// runAgent starts the agent and, as the namespace's init, reaps every
// process until the agent has ended.
func runAgent(ctx context.Context, spec childSpec, st *state, sigs <-chan os.Signal) chainStatus {
	ws, err := os.Getwd()
	if err != nil {
		return setupFailed(st, "workspace", err)
	}
	env := agentEnv(spec.Env, ws)
	path, err := lookPath(spec.Argv[0], env, ws)
	if err != nil {
		st.fail("resolve-agent", err)
		return chainStatus{Exit: startExitCode(err), Error: err.Error()}
	}
	st.ok("resolve-agent", path)
	pid, err := syscall.ForkExec(path, spec.Argv, &syscall.ProcAttr{
		Dir:   ws,
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{
			Setpgid:                    true,
			Cloneflags:                 syscall.CLONE_NEWUSER,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: AgentUID, HostID: 0, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: AgentGID, HostID: 0, Size: 1}},
			GidMappingsEnableSetgroups: false,
		},
	})
	if err != nil {
		err = fmt.Errorf("start agent %q: %w", path, err)
		st.fail("start-agent", err)
		return chainStatus{Exit: startExitCode(err), Error: err.Error()}
	}
	st.ok("start-agent", fmt.Sprintf("pid %d", pid))
	ctxDone := ctx.Done()
	for {
		if ws, ok := reap(pid); ok {
			res := statusOf(ws)
			st.ok("agent-exit", fmt.Sprintf("exit %d signal %q", res.Exit, res.Signal))
			return res
		}
		select {
		case sig := <-sigs:
			if sig != unix.SIGCHLD {
				forward(pid, sig.(syscall.Signal))
			}
		case <-ctxDone:
			ctxDone = nil
			forward(pid, unix.SIGTERM)
		}
	}
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
