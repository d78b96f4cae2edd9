package stage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/internal/egress"
	"github.com/batonhq/baton/sandbox/runspec"
)

// outerReexec, set to "off" at link time (-X), keeps runner-outer from
// re-exec'ing: tests of the in-process supervisor build such a runner.
var outerReexec string

// outerSignals are the signals runner-outer takes (RunOuter).
var outerSignals = []os.Signal{unix.SIGUSR1, unix.SIGUSR2, unix.SIGTERM, unix.SIGINT, unix.SIGHUP}

// outerHandover is what runner-outer passes to the image it execs
// (runner-outer-wait): the spec, and the running chain's descriptors,
// whose numbers stay across the exec. -1: none.
type outerHandover struct {
	Spec        runspec.Spec `json:"spec"`
	Lock        int          `json:"lock"`
	Journal     int          `json:"journal"`
	State       int          `json:"state"`
	Stderr      int          `json:"stderr"`
	StderrPipe  int          `json:"stderrPipe"` // the agent's stderr, read end
	Input       int          `json:"input"`      // the input socket's listener
	Tools       int          `json:"tools"`      // the workers' tools socket's listener
	ToolsAgent  int          `json:"toolsAgent"` // the agent's tools socket's listener
	Stdout      int          `json:"stdout"`
	Status      int          `json:"status"`
	Control     int          `json:"control"`
	Stdin       int          `json:"stdin"`
	StdinSource int          `json:"stdinSource"` // the job's input, not yet written
	Init        int          `json:"init"`        // the sandbox's init's pidfd
	Disk        int          `json:"disk"`
	Cgroup      int          `json:"cgroup"`
	CgroupPath  string       `json:"cgroupPath,omitempty"`
	Egress      []int        `json:"egress,omitempty"` // the proxy's and DNS stub's sockets
	Pool        int          `json:"pool"`             // a prestarted chain's socket, before its take
	// EgressCA is the run's CA with its key (egress.CA.MarshalPEM), for
	// a run with secrets.
	EgressCA string `json:"egressCA,omitempty"`
}

// handOver execs this binary as runner-outer-wait, which supervises the
// chain from there: the exec sheds the heap and threads runner-outer's
// setup left behind for as long as the run lasts (docs/benchmarks-log.md,
// "Density"). It is called once runner-inner has handed the init over and
// before any of the services (journal copy, stdin, input, egress) has
// started, so nothing is in flight. It returns only if this runner stays,
// with the stop signals it took meanwhile, to be acted on: when the exec
// failed or was not tried (a run with pasta, whose parent-death signal is
// bound to the thread that started it, which the exec would end).
func (o *outerRun) handOver(sigs chan os.Signal) []os.Signal {
	if outerReexec == "off" {
		return nil
	}
	// Every thread but os/signal's has the mask this one has.
	if !chain.BlockedStops() {
		// Then a stop sent during the exec could be lost.
		o.st.ok("handover", "stays: runner-outer could not start with SIGUSR1 and SIGUSR2 blocked")
		return nil
	}
	if o.net != nil && o.net.pasta != nil {
		o.st.ok("handover", "stays: an exec would end the thread pasta's parent-death signal is bound to")
		return nil
	}
	h, err := o.handover()
	if err != nil {
		o.st.fail("handover", err)
		return nil
	}
	f, err := sealedFile("baton-outer-handover", chain.MustJSON(h))
	if err != nil {
		o.st.fail("handover", err)
		return nil
	}
	defer f.Close()
	argv, err := passDescriptors(f, h)
	if err != nil {
		o.st.fail("handover", err)
		return nil
	}
	// Close-on-exec again if this runner stays (after an exec it is moot).
	defer unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	// SIGHUP is ignored anyway, and stays ignored across the exec.
	signal.Ignore(unix.SIGHUP)
	// Stop hands sigs every signal the runtime took before it returns,
	// and disables them: the runtime's signal thread blocks the held
	// stops again, so from here they wait, pending, for the new image.
	// SIGTERM and SIGINT cannot be blocked in a Go program: until the new
	// image takes them, either ends this runner (the runtime's default),
	// which ends the run as its runner's death.
	signal.Stop(sigs)
	var drained []os.Signal
	for len(sigs) > 0 {
		// A SIGHUP taken before the Ignore above is ignored too, as
		// everywhere: returned, it would have a pool chain abandoned.
		if sig := <-sigs; sig != unix.SIGHUP {
			drained = append(drained, sig)
		}
	}
	if len(drained) > 0 {
		signal.Notify(sigs, outerSignals...)
		o.st.ok("handover", fmt.Sprintf("stays: %v came first", drained[0]))
		return drained
	}
	err = syscall.Exec("/proc/self/exe", argv, chain.StageEnv)
	signal.Notify(sigs, outerSignals...)
	o.st.fail("handover", fmt.Errorf("exec runner-outer-wait: %w", err))
	return nil
}

// heldEnv marks the environment of a runner-outer that re-exec'd itself
// to hold the stops (its state record says so); its children get
// chain.StageEnv, never this.
const heldEnv = "BATON_RUNNER_HELD_STOPS=reexec"

// heldHow says how runner-outer came to hold the stops, for its state
// record: "" when it does not.
func heldHow() string {
	switch {
	case !chain.BlockedStops():
		return ""
	case slices.Contains(os.Environ(), heldEnv):
		return "re-exec'd with them blocked"
	default:
		return "blocked by its spawner"
	}
}

// handover gathers the running chain's descriptors.
func (o *outerRun) handover() (outerHandover, error) {
	h := outerHandover{Spec: o.spec, Journal: -1, State: -1, Input: -1, StdinSource: -1, Disk: -1, Cgroup: -1, Pool: -1, Tools: -1, ToolsAgent: -1}
	var err error
	fd := func(dst *int, c syscall.Conn) {
		if err == nil {
			*dst, err = rawFd(c)
		}
	}
	fd(&h.Lock, o.lock)
	// A prestarted chain's journal and input come with its take.
	if o.jw != nil {
		fd(&h.Journal, o.jw.File())
	}
	if o.stdinSrc != nil {
		fd(&h.StdinSource, o.stdinSrc)
	}
	if o.pool != nil {
		fd(&h.Pool, o.pool)
	}
	if o.st != nil {
		fd(&h.State, o.st.f)
	}
	fd(&h.Stderr, o.stderr)
	fd(&h.StderrPipe, o.stderrPipe)
	if o.input != nil {
		fd(&h.Input, o.input)
	}
	if o.tools != nil {
		fd(&h.Tools, o.tools)
	}
	if o.toolsAgent != nil {
		fd(&h.ToolsAgent, o.toolsAgent)
	}
	fd(&h.Stdout, o.stdout)
	fd(&h.Status, o.status)
	fd(&h.Control, o.ctl)
	fd(&h.Stdin, o.stdinW)
	fd(&h.Init, o.init.fd)
	if o.disk != nil {
		fd(&h.Disk, o.disk)
	}
	if c := o.plan.cgroup; c != nil {
		fd(&h.Cgroup, c.dir)
		h.CgroupPath = c.path
	}
	if o.plan.ca != nil && err == nil {
		var ca []byte
		ca, err = o.plan.ca.MarshalPEM()
		h.EgressCA = string(ca)
	}
	if o.net != nil {
		h.Egress = make([]int, len(o.net.socks))
		for i, s := range o.net.socks {
			fd(&h.Egress[i], s)
		}
	}
	return h, err
}

// rawFd is c's descriptor, read without os.File.Fd, which would make it
// blocking for the runner that stays if the exec fails.
func rawFd(c syscall.Conn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// passDescriptors clears close-on-exec on h's descriptors and f's (h
// itself), and returns the command line of runner-outer-wait.
func passDescriptors(f *os.File, h outerHandover) ([]string, error) {
	spec, err := rawFd(f)
	if err != nil {
		return nil, err
	}
	fds := append([]int{spec, h.Lock, h.Journal, h.State, h.Stderr, h.StderrPipe, h.Input, h.Stdout, h.Status, h.Control,
		h.Stdin, h.StdinSource, h.Init, h.Disk, h.Cgroup, h.Pool, h.Tools, h.ToolsAgent}, h.Egress...)
	if err := passOnExec(fds...); err != nil {
		unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
		return nil, err
	}
	return []string{os.Args[0], chain.StageOuterWait, "--spec", "/proc/self/fd/" + strconv.Itoa(spec)}, nil
}

// RunOuterWait is `baton runner-outer-wait --spec PATH`: runner-outer
// once it has exec'd itself, its setup done and the sandbox's init handed
// over. It supervises the chain as runner-outer would have (same pid,
// lock, journal, state records of stage "outer"), from the descriptors
// and spec the handover names.
func RunOuterWait(ctx context.Context, specPath string) error {
	// First: the exec made this process dumpable again (docs/sandbox.md,
	// "The chain").
	dumpErr := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// The held stops are blocked on every thread (this image started
	// so): the runtime's signal thread takes them from here, those sent
	// during the exec included.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, outerSignals...)
	defer signal.Stop(sigs)
	b, err := readBounded(specPath)
	if n, ok := strings.CutPrefix(specPath, "/proc/self/fd/"); ok {
		if fd, aerr := strconv.Atoi(n); aerr == nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		return fmt.Errorf("runner-outer-wait: %w", err)
	}
	var h outerHandover
	if err := runspec.DecodeStrict(b, &h); err != nil {
		return fmt.Errorf("runner-outer-wait: handover: %w", err)
	}
	o, err := h.outerRun()
	if err != nil {
		return fmt.Errorf("runner-outer-wait: %w", err)
	}
	if dumpErr != nil {
		o.st.fail("non-dumpable", dumpErr)
	}
	o.st.ok("handover", "runner-outer-wait took over")
	defer o.lock.Close()
	defer o.cleanup()
	if o.pool != nil {
		if err := o.awaitTake(ctx, nil, sigs); err != nil {
			return err
		}
	}
	return o.supervise(ctx, nil, sigs)
}

// outerRun rebuilds runner-outer's state from h.
func (h outerHandover) outerRun() (*outerRun, error) {
	file := func(fd int, name string) *os.File {
		if fd < 0 {
			return nil
		}
		return os.NewFile(uintptr(fd), name)
	}
	o := &outerRun{
		spec:       h.Spec,
		dir:        journal.Dir(h.Spec.RunDir),
		st:         stateOn(file(h.State, "state"), "outer"),
		lock:       file(h.Lock, "lock"),
		stderr:     file(h.Stderr, "stderr"),
		stderrPipe: file(h.StderrPipe, "stderr-pipe"),
		stdout:     file(h.Stdout, "stdout"),
		status:     file(h.Status, "status"),
		ctl:        file(h.Control, "control"),
		stdinW:     file(h.Stdin, "stdin"),
		stdinSrc:   file(h.StdinSource, "input"),
		init:       &initProc{fd: file(h.Init, "init-pidfd")},
		disk:       file(h.Disk, "workspace"),
		pool:       file(h.Pool, "pool"),
		plan:       &outerPlan{},
	}
	need := map[string]*os.File{"lock": o.lock, "stderr": o.stderr, "stderr-pipe": o.stderrPipe, "stdout": o.stdout, "status": o.status,
		"control": o.ctl, "stdin": o.stdinW, "init": o.init.fd}
	if h.Spec.Pooled {
		// Its journal and input come with the take.
		need["pool"] = o.pool
	} else {
		need["input"] = o.stdinSrc
	}
	for name, f := range need {
		if f == nil {
			return nil, fmt.Errorf("handover: no %s descriptor", name)
		}
	}
	if !h.Spec.Pooled {
		jf := file(h.Journal, "journal")
		if jf == nil {
			return nil, errors.New("handover: no journal descriptor")
		}
		var err error
		if o.jw, err = journal.NewWriter(jf); err != nil {
			return nil, err
		}
		o.jw.SetLimit(int64(h.Spec.Limits.Output))
	}
	var err error
	if o.input, err = unixListener(file(h.Input, "input-socket"), "input"); err != nil {
		return nil, err
	}
	if o.tools, err = unixListener(file(h.Tools, "tools-socket"), "tools"); err != nil {
		return nil, err
	}
	o.toolsAgent = file(h.ToolsAgent, "tools-agent")
	if (o.tools == nil) != (h.Spec.Tools == nil) || (o.toolsAgent == nil) != (h.Spec.Tools == nil) {
		return nil, errors.New("handover: the tools sockets do not match the spec's tools")
	}
	if f := file(h.Cgroup, "cgroup"); f != nil {
		o.plan.cgroup = &runCgroup{path: h.CgroupPath, dir: f}
	}
	if len(h.Egress) > 0 {
		if len(h.Egress) != 3 {
			return nil, fmt.Errorf("handover: %d egress sockets, want 3", len(h.Egress))
		}
		if o.plan.policy, err = egress.NewPolicy(h.Spec.Network); err != nil {
			return nil, err
		}
		if h.EgressCA != "" {
			if o.plan.ca, err = egress.ParseCA([]byte(h.EgressCA)); err != nil {
				return nil, fmt.Errorf("handover: %w", err)
			}
		}
		o.net = &outerNet{}
		for i, fd := range h.Egress {
			o.net.socks = append(o.net.socks, file(fd, "egress-"+strconv.Itoa(i)))
		}
	}
	return o, nil
}

// unixListener is the listener of f (nil: none), which it closes.
func unixListener(f *os.File, what string) (*net.UnixListener, error) {
	if f == nil {
		return nil, nil
	}
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("handover: %s socket: %w", what, err)
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		ln.Close()
		return nil, fmt.Errorf("handover: the %s socket is a %T", what, ln)
	}
	return ul, nil
}
