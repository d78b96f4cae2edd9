package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/bounded"
)

// Descriptors of the chain below runner-outer.
const (
	fdStatus    = 3 // status pipe, towards the stage above
	fdSpec      = 4 // this stage's spec (a sealed memfd)
	fdState     = 5 // state.ndjson
	fdWorkspace = 6 // runner-inner: the workspace directory
	fdNet       = 7 // runner-inner: socket pair with runner-outer (network only)
	fdControl   = 6 // runner-inner-child: stop requests from runner-inner
)

// childNamespaces are created at once by the clone of runner-inner-child
// (a re-exec, not unix.Unshare: unshare of a user namespace fails in a
// multi-threaded Go process). The network namespace is runner-inner's,
// owned by its user namespace: nothing inside can change its rules.
const childNamespaces = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP

// routeWait bounds the wait for pasta to configure the namespace.
const routeWait = 10 * time.Second

// nftWait bounds `nft -f -`, which takes milliseconds: within
// runner-outer's wait for the egress sockets (socketsWait), so the run's
// reason names nft.
const nftWait = 5 * time.Second

// RunInner is `baton runner-inner --spec PATH`, cloned by runner-outer as
// uid 0 of a new user namespace with a network namespace of its own; PATH
// is its spec (fd 4). It brings loopback up; for an allowlist it makes the
// egress proxy's and DNS stub's sockets on loopback and hands them to
// runner-outer, and with CIDR entries installs the nft ruleset in one
// transaction and waits for pasta to configure the tap. It then clones
// runner-inner-child into new user, mount, pid, ipc, uts and cgroup
// namespaces, passes SIGTERM and SIGINT on to it as stop requests, and
// relays its status line to runner-outer, or says why there is none.
// Cancelling ctx acts as SIGTERM.
func RunInner(ctx context.Context, specPath string) error {
	report := os.NewFile(fdStatus, "status")
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("runner-inner: mark descriptors close-on-exec: %w", err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	defer signal.Stop(sigs)
	st := stateOn(os.NewFile(fdState, "state"), "inner")
	defer st.close()
	res := runInner(ctx, specPath, st, sigs)
	if _, err := report.Write(res.line()); err != nil {
		return fmt.Errorf("runner-inner: report status: %w", err)
	}
	return nil
}

func runInner(ctx context.Context, specPath string, st *state, sigs <-chan os.Signal) chainStatus {
	fail := func(phase string, err error) chainStatus {
		err = fmt.Errorf("runner-inner: %s: %w", phase, err)
		st.fail(phase, err)
		return chainStatus{Exit: 1, Error: err.Error()}
	}
	b, err := readBounded(specPath)
	if err != nil {
		return fail("spec", err)
	}
	spec, err := decodeInnerSpec(b)
	if err != nil {
		return fail("spec", err)
	}
	// The workspace's path leads through the (0700) run directory, which
	// this uid may not search: runner-outer passed it open.
	if err := unix.Fchdir(fdWorkspace); err != nil {
		return fail("workspace", err)
	}
	_ = unix.Close(fdWorkspace)
	if err := loopbackUp(); err != nil {
		return fail("loopback-up", err)
	}
	st.ok("loopback-up", "")
	if spec.Net.Mode == netPasta {
		if err := installRuleset(spec.Net.Nft, spec.Net.Ruleset); err != nil {
			return fail("nft", err)
		}
		st.ok("nft", "egress ruleset installed: "+strings.Join(strings.Fields(spec.Net.Ruleset), " "))
	}
	if spec.Net.Mode != netNone {
		if err := handOverEgressSockets(); err != nil {
			return fail("egress-sockets", err)
		}
		st.ok("egress-sockets", "proxy "+proxyAddr+", dns "+dnsAddr)
	}
	if spec.Net.Mode == netPasta {
		began := time.Now()
		if err := waitDefaultRoute(routeWait); err != nil {
			return fail("pasta-ready", err)
		}
		st.ok("pasta-ready", "default route after "+time.Since(began).Round(time.Millisecond).String())
	}
	st.ok("network", spec.Net.Mode)
	res, err := cloneChild(ctx, spec.Child, st, sigs)
	if err != nil {
		return fail("clone-child", err)
	}
	return res
}

func decodeInnerSpec(b []byte) (innerSpec, error) {
	var s innerSpec
	if err := decodeStrict(b, &s); err != nil {
		return innerSpec{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	switch s.Net.Mode {
	case netNone, netProxy:
	case netPasta:
		if !cleanAbs(s.Net.Nft) || s.Net.Ruleset == "" {
			return innerSpec{}, fmt.Errorf("%w: a pasta network needs nft and a ruleset", ErrInvalidSpec)
		}
	default:
		return innerSpec{}, fmt.Errorf("%w: network mode %q", ErrInvalidSpec, s.Net.Mode)
	}
	if err := s.Child.validate(); err != nil {
		return innerSpec{}, err
	}
	return s, nil
}

// installRuleset feeds the ruleset to `nft -f -`, one atomic transaction.
func installRuleset(nft, ruleset string) error {
	cmd := exec.Command(nft, "-f", "-")
	cmd.Env = []string{}
	cmd.Stdin = strings.NewReader(ruleset)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := bounded.Output(context.Background(), nftWait, cmd)
	if out = bytes.TrimSpace(out); err != nil && len(out) > 0 {
		return fmt.Errorf("%w: %s", err, out)
	}
	return err
}

// handOverEgressSockets binds the proxy's and DNS stub's sockets on this
// namespace's loopback, sends them to runner-outer and waits for it to
// serve them.
func handOverEgressSockets() error {
	socks, err := egressSockets()
	if err != nil {
		return err
	}
	defer func() {
		for _, fd := range socks {
			unix.Close(fd)
		}
	}()
	if err := unix.Sendmsg(fdNet, []byte("sockets"), unix.UnixRights(socks...), nil, 0); err != nil {
		return fmt.Errorf("send the sockets to runner-outer: %w", err)
	}
	buf := make([]byte, 64)
	n, err := unix.Read(fdNet, buf)
	switch {
	case err != nil:
		return fmt.Errorf("wait for runner-outer: %w", err)
	case string(buf[:n]) != "serving":
		return fmt.Errorf("runner-outer answered %q", buf[:n])
	}
	return unix.Close(fdNet)
}

// egressSockets are the proxy's TCP listener and the DNS stub's UDP and
// TCP sockets, on loopback.
func egressSockets() ([]int, error) {
	var fds []int
	fail := func(err error) ([]int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, err
	}
	for _, s := range []struct {
		typ  int
		port int
	}{{unix.SOCK_STREAM, 3128}, {unix.SOCK_DGRAM, 53}, {unix.SOCK_STREAM, 53}} {
		fd, err := unix.Socket(unix.AF_INET, s.typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fail(err)
		}
		fds = append(fds, fd)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: s.port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return fail(fmt.Errorf("bind 127.0.0.1:%d: %w", s.port, err))
		}
		if s.typ == unix.SOCK_STREAM {
			if err := unix.Listen(fd, 128); err != nil {
				return fail(err)
			}
		}
	}
	return fds, nil
}

// waitDefaultRoute waits until this namespace has a default route, which
// pasta adds last when it configures the tap.
func waitDefaultRoute(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		v4, _ := os.ReadFile("/proc/self/net/route")
		v6, _ := os.ReadFile("/proc/self/net/ipv6_route")
		if hasDefaultRoute4(string(v4)) || hasDefaultRoute6(string(v6)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pasta configured no default route within %v", limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// cloneChild runs runner-inner-child in the sandbox's namespaces and
// returns what it reported, or why it reported nothing.
func cloneChild(ctx context.Context, spec childSpec, st *state, sigs <-chan os.Signal) (chainStatus, error) {
	specFile, err := sealedFile("baton-child-spec", mustJSON(spec))
	if err != nil {
		return chainStatus{}, fmt.Errorf("child spec: %w", err)
	}
	defer specFile.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return chainStatus{}, fmt.Errorf("status pipe: %w", err)
	}
	defer statusR.Close()
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return chainStatus{}, fmt.Errorf("control pipe: %w", err)
	}
	defer ctlW.Close()
	cmd := &exec.Cmd{
		// Through /proc/self/exe, exec needs no search permission on the
		// binary's directories.
		Path:       "/proc/self/exe",
		Args:       []string{os.Args[0], "runner-inner-child", "--spec", fmt.Sprintf("/proc/self/fd/%d", fdSpec)},
		Env:        []string{},
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{statusW, specFile, os.NewFile(fdState, "state"), ctlR}, // fds 3..6
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: childNamespaces,
			// uid 0 of its namespace is uid 0 of this one: the sandbox uid
			// on the host.
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappingsEnableSetgroups: false,
			// The sandbox dies with runner-inner, so runner-outer's SIGKILL
			// of runner-inner tears down the whole pid namespace.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	done, err := startLocked(cmd)
	statusW.Close()
	ctlR.Close()
	if err != nil {
		return chainStatus{}, fmt.Errorf("start the sandbox: %w%s", err, cloneHint(err, os.Geteuid()))
	}
	st.ok("clone-child", fmt.Sprintf("pid %d", cmd.Process.Pid))
	reported := make(chan statusRead, 1)
	go func() { reported <- readChainStatus(statusR) }()
	ctxDone := ctx.Done()
	var waitErr error
	for running := true; running; {
		select {
		case sig := <-sigs:
			// A stop request, never a signal: the sandbox's init takes
			// no signal the agent could send it too.
			_, _ = fmt.Fprintln(ctlW, signalName(sig.(syscall.Signal)))
		case <-ctxDone:
			ctxDone = nil
			_, _ = fmt.Fprintln(ctlW, "TERM")
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

// cloneHint says what to check when a namespace cannot be created.
func cloneHint(err error, uid int) string {
	switch {
	case errors.Is(err, unix.EACCES):
		return fmt.Sprintf(" (the baton binary must be executable by uid %d)", uid)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EUSERS):
		return " (user namespaces are unavailable: check sysctl user.max_user_namespaces," +
			" kernel.unprivileged_userns_clone and kernel.apparmor_restrict_unprivileged_userns" +
			" (deploy/apparmor/baton lifts the latter), and that no seccomp profile of a container" +
			" forbids them; `baton doctor` says more)"
	}
	return ""
}
