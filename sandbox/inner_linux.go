package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
)

// Descriptors of the chain below runner-outer.
const (
	fdStatus = 3 // status pipe, towards runner-outer
	fdSpec   = 4 // runner-inner-child: its spec (a sealed memfd)
	fdState  = 5 // runner-inner-child: state.ndjson
)

// namespaces of the sandbox, created at once by the clone of
// runner-inner-child (a re-exec, not unix.Unshare: unshare of a user
// namespace fails in a multi-threaded Go process).
const namespaces = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET

// RunInner is `baton runner-inner --spec PATH`, started by runner-outer
// with the agent's stdio and the status pipe as fd 3. It checks the
// network policy (only "none" for now: an allowlist is refused, never
// run with less isolation than asked), clones runner-inner-child into
// new user, mount, pid, ipc, uts and net namespaces, forwards SIGTERM
// and SIGINT to it, and relays its status line to runner-outer, or says
// why there is none. Cancelling ctx acts as SIGTERM.
func RunInner(ctx context.Context, specPath string) error {
	report := os.NewFile(fdStatus, "status")
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("runner-inner: mark descriptors close-on-exec: %w", err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	defer signal.Stop(sigs)
	res := runInner(ctx, specPath, sigs)
	if _, err := report.Write(res.line()); err != nil {
		return fmt.Errorf("runner-inner: report status: %w", err)
	}
	return nil
}

func runInner(ctx context.Context, specPath string, sigs <-chan os.Signal) chainStatus {
	spec, err := readSpec(specPath)
	if err != nil {
		return chainStatus{Exit: 1, Error: "runner-inner: " + err.Error()}
	}
	dir := journal.Dir(spec.RunDir)
	st := openState(dir.State(), "inner")
	defer st.close()
	st.ok("network", "none: loopback only")
	res, err := cloneChild(ctx, spec, dir, st, sigs)
	if err != nil {
		st.fail("clone-child", err)
		return chainStatus{Exit: 1, Error: err.Error()}
	}
	return res
}

// cloneChild runs runner-inner-child in the sandbox's namespaces and
// returns what it reported, or why it reported nothing.
func cloneChild(ctx context.Context, spec Spec, dir journal.Dir, st *state, sigs <-chan os.Signal) (chainStatus, error) {
	specFile, err := sealedFile("baton-child-spec", mustJSON(spec.child()))
	if err != nil {
		return chainStatus{}, fmt.Errorf("runner-inner: child spec: %w", err)
	}
	defer specFile.Close()
	stateFile, err := os.OpenFile(dir.State(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return chainStatus{}, fmt.Errorf("runner-inner: open state: %w", err)
	}
	defer stateFile.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return chainStatus{}, fmt.Errorf("runner-inner: status pipe: %w", err)
	}
	defer statusR.Close()
	// The sandbox's uid cannot reach the (0700) run directory; the child
	// starts in the workspace instead, and binds it from its cwd.
	if err := os.Chdir(dir.Workspace()); err != nil {
		statusW.Close()
		return chainStatus{}, fmt.Errorf("runner-inner: enter the workspace: %w", err)
	}
	euid := os.Geteuid()
	uid, gid := spec.sandboxIDs(euid, os.Getegid())
	if euid == 0 {
		// Root's supplementary groups would follow the agent into the
		// sandbox and open host files to it.
		if err := syscall.Setgroups(nil); err != nil {
			statusW.Close()
			return chainStatus{}, fmt.Errorf("runner-inner: drop supplementary groups: %w", err)
		}
	}
	cmd := &exec.Cmd{
		// Through /proc/self/exe, exec needs no search permission on the
		// binary's directories, only its execute bit for the sandbox uid.
		Path:       "/proc/self/exe",
		Args:       []string{os.Args[0], "runner-inner-child", "--spec", fmt.Sprintf("/proc/self/fd/%d", fdSpec)},
		Env:        []string{},
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{statusW, specFile, stateFile}, // fds 3, 4, 5
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 namespaces,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
			GidMappingsEnableSetgroups: false,
			// Become uid 0 of the namespace, which is the sandbox uid on
			// the host (a root parent's uid is not mapped at all).
			Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
			// The sandbox dies with runner-inner, so runner-outer's SIGKILL
			// of runner-inner tears down the whole pid namespace.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	done, err := startLocked(cmd)
	statusW.Close()
	if err != nil {
		return chainStatus{}, fmt.Errorf("runner-inner: start the sandbox: %w%s", err, cloneHint(err, uid))
	}
	st.ok("clone-child", fmt.Sprintf("pid %d, uid 0->%d, gid 0->%d", cmd.Process.Pid, uid, gid))
	reported := make(chan statusRead, 1)
	go func() { reported <- readChainStatus(statusR) }()
	ctxDone := ctx.Done()
	var waitErr error
	for running := true; running; {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-ctxDone:
			ctxDone = nil
			_ = cmd.Process.Signal(unix.SIGTERM)
		case waitErr = <-done:
			running = false
		}
	}
	how := describeExit(waitErr)
	st.ok("child-exit", how)
	r := <-reported
	switch {
	case r.status != nil:
		return *r.status, nil
	case r.err != nil:
		return chainStatus{Exit: 1, Error: fmt.Sprintf("runner-inner-child (%s) reported garbage: %v", how, r.err)}, nil
	}
	res := chainStatus{Exit: 1}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res = statusOf(ws)
		}
	}
	res.Error = "the sandbox's init (runner-inner-child) ended without reporting: " + how + "; see stderr.log and state.ndjson"
	return res, nil
}

// sealedFile is a memfd holding b that nobody can change.
func sealedFile(name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// cloneHint says what to check when the sandbox cannot start.
func cloneHint(err error, uid int) string {
	switch {
	case errors.Is(err, unix.EACCES):
		return fmt.Sprintf(" (the baton binary must be executable by the sandbox uid %d)", uid)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EUSERS):
		return " (user namespaces are unavailable: check sysctl user.max_user_namespaces," +
			" kernel.unprivileged_userns_clone and kernel.apparmor_restrict_unprivileged_userns," +
			" and that no seccomp profile of a container forbids them; `baton doctor` says more)"
	}
	return ""
}
