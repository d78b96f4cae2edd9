package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batonhq/baton/internal/bounded"
)

// processCPU is the CPU time (user + system, all threads) pid has used.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// runnersCPU is the CPU time the processes pids have spent on a CPU, from
// each thread's schedstat: nanoseconds, where /proc/<pid>/stat counts
// 10 ms ticks, which a process that wakes for microseconds a minute
// gets whole or not at all. A process gone counts nothing.
func runnersCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
			if err != nil {
				continue
			}
			if f := strings.Fields(string(b)); len(f) > 0 {
				if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					sum += time.Duration(ns)
				}
			}
		}
	}
	return sum
}

// processRSS is pid's resident set size in bytes.
func processRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusRSS(b)
}

// workerAttr makes a worker process die with the suite (a worker left
// behind would go on holding runs), in a session of its own, so it has an
// autogroup of its own (see prioritize).
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
}

// autogroupNice is the nice value of the scheduling autogroups the suite
// gives itself and its workers (see prioritize).
const autogroupNice = -20

// autogroupsOn reports whether the kernel groups tasks by session for
// scheduling (CONFIG_SCHED_AUTOGROUP, and the tasks in the root cpu
// cgroup): then every run, whose runner starts a session, weighs as much as
// the whole worker.
func autogroupsOn() bool {
	b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// prioritize sets the autogroup nice of pid's session (0: this process)
// to autogroupNice, and returns how to set it back. With autogroups, 200
// runs are 200 scheduling groups of equal weight against the one of the
// worker and NATS: on 2 cores the control plane then gets 1/201 of the CPU
// whenever the agents are busy. A deployment runs the worker and NATS in
// cgroups of their own; this is the suite's way of doing the same.
func prioritize(pid int) (restore func(), err error) {
	path := "/proc/self/autogroup"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/autogroup", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	was, err := parseAutogroup(b)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(autogroupNice)), 0); err != nil {
		return nil, fmt.Errorf("bench: set autogroup nice of %s: %w", path, err)
	}
	return func() { _ = os.WriteFile(path, []byte(strconv.Itoa(was)), 0) }, nil
}

// timeCommand runs a command to its end and returns how long it took; as
// cred's user if cred is set. Still running at limit, it is killed, and
// the error says so.
func timeCommand(ctx context.Context, limit time.Duration, cred *syscall.Credential, argv []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	began := time.Now()
	out, err := bounded.Output(ctx, limit, cmd)
	d := time.Since(began)
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, firstLine(string(out)))
	}
	return d, nil
}

// sandboxCredential is the user a root runner runs sandboxes as (the
// configuration's default sandbox uid); nil when not root.
func sandboxCredential() *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	return &syscall.Credential{Uid: 65534, Gid: 65534}
}

// cpuSample is the CPU time each process on the host has used so far,
// with its class (see classify; this process is classSuite: the embedded
// server and the subscribers).
type cpuSample map[int]procCPU

type procCPU struct {
	class string
	cpu   time.Duration
}

func sampleCPU() cpuSample {
	out := cpuSample{}
	self := os.Getpid()
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cpu, err := processCPU(pid)
		if err != nil {
			continue // gone
		}
		class := classSuite
		if pid != self {
			cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil {
				continue
			}
			class = classify(cmd)
		}
		out[pid] = procCPU{class, cpu}
	}
	return out
}

// cpuBetween sums by class the CPU each process used from before to
// after; a process born in between counts whole. A process that ended in
// between is missed.
func cpuBetween(before, after cpuSample) map[string]time.Duration {
	out := map[string]time.Duration{}
	for pid, a := range after {
		out[a.class] += a.cpu - before[pid].cpu
	}
	return out
}

// holdsUnder reports whether process pid has a file under prefix open:
// runner-outer-wait's spec is a descriptor, its journal a file of the
// run's directory.
func holdsUnder(pid int, prefix string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(dir + "/" + fd.Name()); err == nil && strings.HasPrefix(target, prefix) {
			return true
		}
	}
	return false
}

// runCount is what runProcesses found: the runs (runner chains), the
// baton processes of their chains, and every process of their trees
// (agents included); runners are the baton processes' pids.
type runCount struct {
	runs, baton, all int
	runners          []int
}

// runProcesses finds the runner chains of the suite's runs (a
// runner-outer whose spec is in the suite's state directory, and its
// descendants: other suites on the host have their own) and returns their
// counts and the sum of the baton processes' PSS.
func (e *env) runProcesses() (runCount, int64, error) {
	type proc struct {
		ppid    int
		cmdline []byte
	}
	procs := map[int]proc{}
	children := map[int][]int{}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return runCount{}, 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone
		}
		ppid, err := parseStatPPID(st)
		if err != nil {
			return runCount{}, 0, err
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		procs[pid] = proc{ppid, cmd}
		children[ppid] = append(children[ppid], pid)
	}
	var c runCount
	var pss int64
	var walk func(pid int) error
	walk = func(pid int) error {
		c.all++
		if classify(procs[pid].cmdline) == classRunner {
			c.baton++
			c.runners = append(c.runners, pid)
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
			if err != nil {
				return fmt.Errorf("bench: PSS of runner process %d: %w", pid, err)
			}
			p, err := parsePss(b)
			if err != nil {
				return err
			}
			pss += p
		}
		for _, k := range children[pid] {
			if err := walk(k); err != nil {
				return err
			}
		}
		return nil
	}
	prefix := e.stateDir + string(os.PathSeparator)
	for pid, p := range procs {
		if classify(p.cmdline) != classRunner {
			continue
		}
		if pp, ok := procs[p.ppid]; ok && classify(pp.cmdline) == classRunner {
			continue // a later stage of a chain (they run with the same arguments)
		}
		if !strings.HasPrefix(specArg(p.cmdline), prefix) && !holdsUnder(pid, prefix) {
			continue // another suite's
		}
		c.runs++
		if err := walk(pid); err != nil {
			return runCount{}, 0, err
		}
	}
	return c, pss, nil
}

// threadsCPU is the CPU time pid's live threads have run, to the
// nanosecond (the sum of /proc/<pid>/task/*/schedstat's first field):
// finer than processCPU's clock ticks, for a few milliseconds a job.
// Threads that ended are missed; a Go process rarely ends one.
func threadsCPU(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: schedstat %q", ErrProc, b)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}
