package stage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/sandbox/internal/chain"
	"github.com/batonhq/baton/sandbox/internal/seccomp"
)

// rlimitResources maps rlimit names to their resources.
var rlimitResources = map[string]int{
	"as": unix.RLIMIT_AS, "core": unix.RLIMIT_CORE, "cpu": unix.RLIMIT_CPU, "data": unix.RLIMIT_DATA,
	"fsize": unix.RLIMIT_FSIZE, "locks": unix.RLIMIT_LOCKS, "memlock": unix.RLIMIT_MEMLOCK,
	"msgqueue": unix.RLIMIT_MSGQUEUE, "nice": unix.RLIMIT_NICE, "nofile": unix.RLIMIT_NOFILE,
	"nproc": unix.RLIMIT_NPROC, "rtprio": unix.RLIMIT_RTPRIO, "rttime": unix.RLIMIT_RTTIME,
	"sigpending": unix.RLIMIT_SIGPENDING, "stack": unix.RLIMIT_STACK,
}

// RunExec is `baton runner-exec --spec PATH`, the last stage before the
// agent: started by runner-inner-child as the agent uid in a user
// namespace of its own, PATH its spec (fd 3: a sealed memfd, or a pipe
// the init writes at a prestarted chain's take). It empties its
// capability sets, bounding and ambient included, reads its spec,
// applies the rlimits (nproc counts
// the agent's processes in that namespace only, so it bounds this run,
// not the sandbox uid), sets no_new_privs, loads the seccomp filter on
// every thread and executes the agent. If any step fails it writes why on
// fd 4 and exits 126: an agent never runs with less than it was promised.
func RunExec(_ context.Context, specPath string) error {
	// Capabilities, no_new_privs and the filter are per thread: the
	// thread that executes the agent is the one that set them.
	runtime.LockOSThread()
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return execFailed(fmt.Errorf("mark descriptors close-on-exec: %w", err))
	}
	// Opened first, read last: a prestarted chain's stage
	// (sandbox.Prestart) waits for its spec, the agent's, on a pipe, all
	// else done.
	f, err := os.Open(specPath)
	if err != nil {
		return execFailed(fmt.Errorf("read spec: %w", err))
	}
	arch, err := seccomp.Native()
	if err != nil {
		return execFailed(err)
	}
	filter, err := seccomp.Build(arch)
	if err != nil {
		return execFailed(err)
	}
	if err := dropCapabilities(); err != nil {
		return execFailed(err)
	}
	b, err := chain.ReadFile(f, specPath)
	if err != nil {
		return execFailed(err)
	}
	spec, err := decodeExecSpec(b)
	if err != nil {
		return execFailed(err)
	}
	// Last before the filter and exec: a low nproc may leave this Go
	// program unable to start another thread.
	for _, r := range spec.Rlimits {
		lim := unix.Rlimit{Cur: r.Value, Max: r.Value}
		if err := unix.Setrlimit(rlimitResources[r.Name], &lim); err != nil {
			return execFailed(fmt.Errorf("rlimit %s=%d: %w", r.Name, r.Value, err))
		}
	}
	// The sandbox's init ignores every signal, and an ignored signal stays
	// ignored across exec; Go keeps an inherited SIGINT or SIGHUP ignored
	// unless they are handled. Handled, exec resets them to the default:
	// the agent gets interrupts (baton interrupt) as any program would.
	signal.Notify(make(chan os.Signal, 1), unix.SIGINT, unix.SIGHUP)
	// And none blocked, whatever the chain inherited (runner-outer runs
	// with SIGUSR1 and SIGUSR2 blocked but on its signal thread): a mask
	// survives exec.
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &unix.Sigset_t{}, nil); err != nil {
		return execFailed(fmt.Errorf("unblock signals: %w", err))
	}
	if err := seccomp.Install(filter); err != nil {
		return execFailed(err)
	}
	if spec.Git != nil {
		// As the agent, under its limits and filter, through its egress;
		// before it exists, so it never sees the clone's environment.
		commit, err := cloneWorkspace(context.Background(), spec.Git, spec.Dir, spec.Env)
		if err != nil {
			return execFailed(err)
		}
		// The worker's diff baseline: told on the pipe the agent never
		// holds, and recorded by the init in state.ndjson.
		// (A raw write: an *os.File of it could be finalized, and the fd
		// closed, before the exec.)
		if _, err := unix.Write(fdExecErr, []byte(gitClonedNote+commit+"\n")); err != nil {
			return execFailed(fmt.Errorf("report the cloned commit: %w", err))
		}
	}
	err = syscall.Exec(spec.Path, spec.Argv, spec.Env)
	return execFailed(fmt.Errorf("exec %s: %w", spec.Path, err))
}

// execFailed reports err to runner-inner-child and ends the stage.
func execFailed(err error) error {
	f := os.NewFile(fdExecErr, "exec-error")
	_, _ = fmt.Fprintf(f, "exec stage: %v", err)
	os.Exit(126)
	return err
}

// dropCapabilities empties the bounding set (it needs CAP_SETPCAP, which
// this stage was started with as its only ambient capability), then
// every other set.
func dropCapabilities() error {
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	return nil
}
