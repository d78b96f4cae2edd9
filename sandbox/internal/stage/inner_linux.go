package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/mcp"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/runspec"
)

// Descriptors of the chain below runner-outer.
const (
	fdStatus    = 3 // status pipe, read by runner-outer
	fdSpec      = 4 // this stage's spec (a sealed memfd)
	fdState     = 5 // state.ndjson
	fdWorkspace = 6 // runner-inner: the agent directory (a run directory made before it: the workspace), its cwd
	fdChain     = 7 // runner-inner: socket pair with runner-outer (egress sockets, the init's pidfd)
	fdStops     = 8 // runner-inner: the control pipe's read end, passed on to the init
	fdControl   = 6 // runner-inner-child: stop requests from runner-outer
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
// namespaces, hands runner-outer a pidfd of it and exits: the child,
// reparented to runner-outer (a child subreaper), holds the namespaces
// from then on, reports to runner-outer on the status pipe and takes
// runner-outer's stop requests on the control pipe. runner-inner owns
// nothing that must outlive the start (docs/sandbox.md, "The chain").
// A setup that fails reports why on the status pipe instead.
func RunInner(_ context.Context, specPath string) error {
	report := os.NewFile(fdStatus, "status")
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("runner-inner: mark descriptors close-on-exec: %w", err)
	}
	st := stateOn(os.NewFile(fdState, "state"), "inner")
	defer st.close()
	res, started := runInner(specPath, st, report)
	if started {
		return nil
	}
	if _, err := report.Write(res.line()); err != nil {
		return fmt.Errorf("runner-inner: report status: %w", err)
	}
	return nil
}

// runInner sets the namespace up and starts the sandbox; started reports
// that the sandbox's init runs and runner-outer holds its pidfd, else
// the status says why not.
func runInner(specPath string, st *state, report *os.File) (_ chainStatus, started bool) {
	fail := func(phase string, err error) (chainStatus, bool) {
		err = fmt.Errorf("runner-inner: %s: %w", phase, err)
		st.fail(phase, err)
		return chainStatus{Exit: 1, Error: err.Error()}, false
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
	if spec.Net.Mode == chain.NetPasta {
		if err := installRuleset(spec.Net.Nft, spec.Net.Ruleset); err != nil {
			return fail("nft", err)
		}
		st.ok("nft", "egress ruleset installed: "+strings.Join(strings.Fields(spec.Net.Ruleset), " "))
	}
	if spec.Net.Mode != chain.NetNone || spec.Tools {
		if err := handOverSockets(spec.Net.Mode != chain.NetNone, spec.Tools); err != nil {
			return fail("egress-sockets", err)
		}
		var made []string
		if spec.Net.Mode != chain.NetNone {
			made = append(made, "proxy "+chain.ProxyAddr, "dns "+chain.DNSAddr)
		}
		if spec.Tools {
			made = append(made, "tools "+mcp.SocketAddr)
		}
		st.ok("egress-sockets", strings.Join(made, ", "))
	}
	if spec.Net.Mode == chain.NetPasta {
		began := time.Now()
		if err := waitDefaultRoute(routeWait); err != nil {
			return fail("pasta-ready", err)
		}
		st.ok("pasta-ready", "default route after "+time.Since(began).Round(time.Millisecond).String())
	}
	st.ok("network", spec.Net.Mode)
	if err := cloneChild(spec.Child, st, report); err != nil {
		return fail("clone-child", err)
	}
	return chainStatus{}, true
}

func decodeInnerSpec(b []byte) (innerSpec, error) {
	var s innerSpec
	if err := runspec.DecodeStrict(b, &s); err != nil {
		return innerSpec{}, fmt.Errorf("%w: %w", runspec.ErrInvalidSpec, err)
	}
	switch s.Net.Mode {
	case chain.NetNone, chain.NetProxy:
	case chain.NetPasta:
		if !runspec.CleanAbs(s.Net.Nft) || s.Net.Ruleset == "" {
			return innerSpec{}, fmt.Errorf("%w: a pasta network needs nft and a ruleset", runspec.ErrInvalidSpec)
		}
	default:
		return innerSpec{}, fmt.Errorf("%w: network mode %q", runspec.ErrInvalidSpec, s.Net.Mode)
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

// handOverSockets makes the sandbox's sockets in this network namespace
// (egress: the proxy's and DNS stub's on loopback; tools: the tools
// socket, last), sends them to runner-outer and waits for it to serve
// them.
func handOverSockets(egress, tools bool) error {
	var socks []int
	if egress {
		var err error
		if socks, err = egressSockets(); err != nil {
			return err
		}
	}
	if tools {
		fd, err := toolsSocket()
		if err != nil {
			for _, s := range socks {
				unix.Close(s)
			}
			return err
		}
		socks = append(socks, fd)
	}
	defer func() {
		for _, fd := range socks {
			unix.Close(fd)
		}
	}()
	if err := unix.Sendmsg(fdChain, []byte("sockets"), unix.UnixRights(socks...), nil, 0); err != nil {
		return fmt.Errorf("send the sockets to runner-outer: %w", err)
	}
	buf := make([]byte, 64)
	n, err := unix.Read(fdChain, buf)
	switch {
	case err != nil:
		return fmt.Errorf("wait for runner-outer: %w", err)
	case string(buf[:n]) != "serving":
		return fmt.Errorf("runner-outer answered %q", buf[:n])
	}
	return nil
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

// toolsSocket is the tools socket's listener: abstract, so it is this
// network namespace's, which only the sandbox shares.
func toolsSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: mcp.SocketAddr}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind %s: %w", mcp.SocketAddr, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
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

// cloneChild starts runner-inner-child in the sandbox's namespaces and
// hands runner-outer a pidfd of it. The child has no parent-death signal:
// this stage exits next, and the child then lives as long as runner-outer
// holds the control pipe's write end (it ends itself when the pipe
// closes, runner-outer's death included).
func cloneChild(spec childSpec, st *state, report *os.File) error {
	specFile, err := sealedFile("baton-child-spec", chain.MustJSON(spec))
	if err != nil {
		return fmt.Errorf("child spec: %w", err)
	}
	defer specFile.Close()
	cmd := &exec.Cmd{
		// Through /proc/self/exe, exec needs no search permission on the
		// binary's directories.
		Path:   "/proc/self/exe",
		Args:   []string{os.Args[0], chain.StageInnerChild, "--spec", fmt.Sprintf("/proc/self/fd/%d", fdSpec)},
		Env:    chain.StageEnv,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		// fds 3..6: runner-outer's status pipe, the spec, state.ndjson
		// and runner-outer's control pipe.
		ExtraFiles: []*os.File{report, specFile, os.NewFile(fdState, "state"), os.NewFile(fdStops, "control")},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: childNamespaces,
			// uid 0 of its namespace is uid 0 of this one: the sandbox uid
			// on the host.
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappingsEnableSetgroups: false,
		},
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the sandbox: %w%s", err, cloneHint(err, os.Geteuid()))
	}
	// Its pid cannot be reused before it is reaped, and nobody reaps it
	// before runner-outer, which it is reparented to when this stage exits.
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("pidfd of the sandbox's init: %w", err)
	}
	defer unix.Close(pidfd)
	if err := unix.Sendmsg(fdChain, []byte(initMessage), unix.UnixRights(pidfd), nil, 0); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("send the init's pidfd to runner-outer: %w", err)
	}
	st.ok("clone-child", fmt.Sprintf("pid %d, handed to runner-outer", cmd.Process.Pid))
	return nil
}

// initMessage goes with the pidfd of the sandbox's init.
const initMessage = "init"

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
