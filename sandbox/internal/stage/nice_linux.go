package stage

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// applyNice gives this process the CPU priority nice: every thread of it
// (Linux keeps a nice per thread; a thread or process started later
// inherits its creator's), and, when the kernel groups tasks by session,
// its session's autogroup, whose nice weighs the whole group against the
// others. runner-outer is its session's leader, so that group is the
// run's: the chain and the agent. It says what it set. An autogroup change
// the kernel refuses for now (EAGAIN: without CAP_SYS_ADMIN it takes one a
// tenth of a second on the whole machine) is tried again in the
// background, for a second, and later tells its outcome to late, so the
// start does not wait for it.
func applyNice(nice int, late func(error)) (string, error) {
	// Threads the runtime starts meanwhile come from one already set or
	// not yet listed: a pass that finds every thread set ends it.
	done := map[int]bool{}
	for pass := 0; ; pass++ {
		names, err := taskNames()
		if err != nil {
			return "", err
		}
		tids, err := parseTasks(names)
		if err != nil {
			return "", err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh++
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, unix.ESRCH) {
				if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
					return "", fmt.Errorf("set nice %d: %w (below 0 needs CAP_SYS_NICE: a root worker)", nice, err)
				}
				return "", fmt.Errorf("set nice %d of thread %d: %w", nice, tid, err)
			}
			done[tid] = true
		}
		if fresh == 0 {
			break
		}
		if pass == 8 {
			return "", fmt.Errorf("set nice %d: threads still starting after %d passes", nice, pass+1)
		}
	}
	detail := fmt.Sprintf("nice %d on %d threads", nice, len(done))
	on, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	if err != nil || strings.TrimSpace(string(on)) != "1" {
		return detail + "; no autogroups", nil
	}
	err = setAutogroupNice(nice)
	if errors.Is(err, unix.EAGAIN) {
		go func() { late(retryAutogroupNice(nice)) }()
		return detail + "; its session's autogroup: the kernel asked to wait, tried again meanwhile", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s, but not its autogroup's: %w", detail, err)
	}
	return detail + " and on its session's autogroup", nil
}

func taskNames() ([]string, error) {
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// setAutogroupNice sets the nice of this process's autogroup.
func setAutogroupNice(nice int) error {
	if err := os.WriteFile("/proc/self/autogroup", []byte(strconv.Itoa(nice)), 0); err != nil {
		return err
	}
	b, err := os.ReadFile("/proc/self/autogroup")
	if n, ok := parseAutogroupNice(string(b)); err == nil && ok && n != nice {
		return fmt.Errorf("the autogroup reads nice %d after it was set to %d", n, nice)
	}
	return nil
}

// retryAutogroupNice tries setAutogroupNice again while the kernel says
// EAGAIN, for a second at most.
func retryAutogroupNice(nice int) error {
	deadline := time.Now().Add(time.Second)
	for {
		time.Sleep(110 * time.Millisecond)
		err := setAutogroupNice(nice)
		if !errors.Is(err, unix.EAGAIN) || time.Now().After(deadline) {
			return err
		}
	}
}
