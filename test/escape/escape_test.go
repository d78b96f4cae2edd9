package escape

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/protocol"
)

// TestEscape runs hostile agents through real jobs of a root worker, while
// an innocent run works beside them, and asserts that every escape
// attempt fails, every hostile run still ends cleanly (its agent exits 0,
// its journal and its published events agree line for line), the
// innocent run ends exactly as it would alone, and the host is as it was.
// Invariant I7 of the design.
func TestEscape(t *testing.T) {
	w := newEscapeWorld(t)
	// The host really serves NATS on each of its addresses: if the agent
	// cannot reach it, the sandbox is why.
	for _, a := range escapeHostAddrs(t) {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(a, strconv.Itoa(w.natsPort)), 2*time.Second)
		if err != nil {
			t.Fatalf("the host itself cannot reach NATS on %s: %v", a, err)
		}
		c.Close()
	}

	// The victim: another run, with a journal and a workspace file.
	victim := "escape-victim"
	w.submit(map[string]any{"runId": victim, "profile": "sh",
		"args": []string{`echo victim-start; echo secret > victim.txt; sleep 8; cat victim.txt; echo victim-end`}})
	victimDir := filepath.Join(w.stateDir, "runs", victim)
	escapeWaitFile(t, filepath.Join(journal.Dir(victimDir).Workspace(), "victim.txt"))

	marker := fmt.Sprintf("baton-escape-%d", os.Getpid())
	runDir := func(id string) string { return filepath.Join(w.stateDir, "runs", id) }
	hostUser := escapeHostUser(t)
	resolver := escapeResolver()

	w.waitPool(escapePool)
	t.Run("attacks", func(t *testing.T) {
		// The same attacks on sandboxes started ahead of their jobs.
		for _, v := range []escapeVariant{{"", "hostile"}, {"-pooled", "hostile-pooled"}} {
			t.Run("files"+v.suffix, func(t *testing.T) {
				t.Parallel()
				id := "escape-files" + v.suffix
				w.submit(map[string]any{"runId": id, "profile": v.profile, "args": []string{"files",
					"--state-dir", w.stateDir, "--run-dir", runDir(id), "--victim", victimDir,
					"--host-pid", strconv.Itoa(os.Getpid()), "--host-user", hostUser, "--marker", marker}})
				r := w.wait(t, id, 60*time.Second)
				escapeSucceeded(t, r)
				v.took(t, w, id)
				r.attempts(t, "read /etc/shadow", "read another run's journal", "read another run's workspace",
					"read this run's journal", "read this run's spec (the nonce)", "read the host's /etc/passwd",
					"list "+w.stateDir, "write /etc/"+marker, "write /usr/"+marker, "write another run's workspace",
					"write this run's journal", "write /proc/sysrq-trigger", "write through init's descriptors",
					"stdout is the journal", "open /proc/1/exe for writing", "see host processes",
					"signal a host process (SIGKILL)", "kill the sandbox's init", "look for the nonce")
				// The nonce never reached the agent: all it saw is in the journal.
				spec := w.file(id, "spec.json")
				nonce := regexp.MustCompile(`"nonce":"([^"]+)"`).FindStringSubmatch(spec)
				if nonce == nil {
					t.Fatalf("no nonce in the spec: %s", spec)
				}
				if strings.Contains(string(r.journal), nonce[1]) {
					t.Error("ESCAPE: the agent saw its run's nonce")
				}
				// Nothing it wrote landed on the host.
				for _, p := range []string{"/tmp/" + marker, "/etc/" + marker, "/" + marker, filepath.Join(w.stateDir, marker)} {
					if _, err := os.Stat(p); err == nil {
						t.Errorf("ESCAPE: %s exists on the host", p)
					}
				}
			})
			t.Run("syscalls"+v.suffix, func(t *testing.T) {
				t.Parallel()
				id := "escape-syscalls" + v.suffix
				w.submit(map[string]any{"runId": id, "profile": v.profile, "args": []string{"syscalls", "--run-dir", runDir(id)}})
				r := w.wait(t, id, 60*time.Second)
				escapeSucceeded(t, r)
				v.took(t, w, id)
				r.attempts(t, "raw IPv4 socket", "AF_PACKET socket", "ptrace init", "ptrace own child", "process_vm_readv own child",
					"unshare a user namespace", "clone a user namespace", "clone3", "mount a tmpfs", "unmount the workspace",
					"remount / read-write", "pivot_root", "open_tree", "io_uring_setup", "bpf", "perf_event_open", "keyctl",
					"userfaultfd", "kexec_load", "init_module", "setns", "TIOCSTI on a pty",
					"TIOCSTI with high bits set (CVE-2019-10063)", "TIOCSTI on stdin")
			})
			t.Run("resources"+v.suffix, func(t *testing.T) {
				t.Parallel()
				id := "escape-resources" + v.suffix
				w.submit(map[string]any{"runId": id, "profile": v.profile, "args": []string{"resources",
					"--pids", strconv.Itoa(escapePids), "--data", strconv.Itoa(escapeData), "--fsize", strconv.Itoa(escapeFsize),
					"--tmp", strconv.Itoa(escapeTmp), "--nofile", strconv.Itoa(escapeNofile)}})
				r := w.wait(t, id, 90*time.Second)
				escapeSucceeded(t, r)
				v.took(t, w, id)
				r.attempts(t, "fork until it breaks", "exhaust memory", "write a huge file", "fill /tmp", "open files until it breaks")
				// A root worker's workspace goes with its image once the
				// run has ended; an unbounded one's file stays.
				if st, err := os.Stat(filepath.Join(journal.Dir(runDir(id)).Workspace(), "huge")); err == nil && st.Size() > escapeFsize || err != nil && !os.IsNotExist(err) {
					t.Errorf("the huge file on the host: %v, %v", st, err)
				}
			})
		}
		t.Run("network", func(t *testing.T) {
			t.Parallel()
			id := "escape-network"
			w.submit(map[string]any{"runId": id, "profile": "hostile-net", "args": []string{"network",
				"--nats-port", strconv.Itoa(w.natsPort), "--host-addrs", strings.Join(escapeHostAddrs(t), ","),
				"--resolver", resolver, "--test-name", escapeName, "--test-addr", w.host.Addr.String(),
				"--test-port", strconv.Itoa(w.host.Port), "--host-side", w.host.HostSide.String()}})
			r := w.wait(t, id, 90*time.Second)
			escapeSucceeded(t, r)
			r.attempts(t, "connect to NATS on loopback", "CONNECT to NATS on loopback through the proxy",
				"connect to the host side of the test link", "CONNECT to the host side of the test link",
				"connect to 169.254.169.254", "CONNECT to 169.254.169.254", "GET the metadata service through the proxy",
				"CONNECT to a name off the allowlist", "resolve a name off the allowlist", "exfiltrate through the DNS stub",
				"exfiltrate through DNS to 8.8.8.8",
				"allowed: GET the test host by name through the proxy", "allowed: GET the test host's listed address directly",
				"allowed: resolve the test host's name")
			if w.hits.get("/allowed-proxy") != 1 || w.hits.get("/allowed-direct") != 1 {
				t.Errorf("the test host saw %v", w.hits.n)
			}
			// The stub refused the exfiltrating name without resolving it.
			if !strings.Contains(r.state, `dns: refused \"c2vjcmv0lwrhdge.exfil.example\"`) {
				t.Errorf("state.ndjson records no refusal of the exfiltrating query:\n%s", r.state)
			}
			// And the chain's egress subject has both refusals (wait
			// checked each egress message against its journal record).
			for _, refusal := range []string{`"host":"c2vjcmv0lwrhdge.exfil.example","port":53,"method":"DNS","allowed":false`,
				`"host":"169.254.169.254","port":80,"method":"GET","allowed":false`} {
				if !bytes.Contains(r.events, []byte(refusal)) {
					t.Errorf("no egress message has %s", refusal)
				}
			}
			for _, phase := range []string{"pasta-start", "nft", "egress-sockets", "pasta-ready"} {
				if !strings.Contains(r.state, `"phase":"`+phase+`"`) {
					t.Errorf("state.ndjson lacks the %s phase", phase)
				}
			}
		})
		t.Run("trees", func(t *testing.T) {
			t.Parallel()
			id := "escape-trees"
			start := time.Now()
			w.submit(map[string]any{"runId": id, "profile": "hostile-outputs", "args": []string{"trees"}})
			// The capture is bounded and linear: the run ends once, soon,
			// its outputs saying what they skipped; it is never handed on
			// to be captured again, and the worker stays connected.
			r := w.wait(t, id, 90*time.Second)
			escapeSucceeded(t, r)
			r.attempts(t, "allowed: a chain of 18,000 directories", "allowed: a path of 5,000 bytes", "allowed: names of 40 KB")
			if !strings.Contains(r.status.OutputsError, "skipped") {
				t.Errorf("outputsError %q, want the entries the capture skipped", r.status.OutputsError)
			}
			if want := []protocol.StatusType{protocol.StatusStarted, protocol.StatusSucceeded}; !slices.Equal(r.statuses, want) {
				t.Errorf("statuses %v, want %v: a capture that fails for the workspace's reasons ends the run, never hands it on", r.statuses, want)
			}
			t.Logf("trees: the run ended %v after its job, outputsError %q", time.Since(start).Round(time.Millisecond), escapeShort(r.status.OutputsError))
		})
		t.Run("tools", func(t *testing.T) {
			t.Parallel()
			escapeTools(t, w, "escape-tools", runDir("escape-tools"))
		})
		t.Run("forged sentinel", func(t *testing.T) {
			t.Parallel()
			id := "escape-forge"
			w.submit(map[string]any{"runId": id, "profile": "hostile", "args": []string{"forge"}})
			r := w.wait(t, id, 60*time.Second)
			// The forged lines are ordinary events; the run ends as the agent
			// really did (exit 3), not as the forgeries say.
			if !strings.Contains(string(r.events), `"__nonce":"guess"`) {
				t.Errorf("the forged sentinel was not published as an ordinary line: %q", r.events)
			}
			if r.status.Status != protocol.StatusFailed || r.status.ExitCode == nil || *r.status.ExitCode != 3 {
				t.Errorf("status %+v, want failed with exit 3", r.status)
			}
		})
		t.Run("fork bomb", func(t *testing.T) {
			t.Parallel()
			id := "escape-forkbomb"
			w.submit(map[string]any{"runId": id, "profile": "sh", "timeout": "4s",
				// bash, unlike dash, keeps going when a fork fails.
				"args": []string{`exec bash -c 'bomb() { bomb | bomb & }; while :; do bomb 2>/dev/null; done'`}})
			// While it rages, its pid namespace holds at most the pids limit
			// of agent processes, and its init.
			ns, most := escapeWatchBomb(t, w, id, 3*time.Second)
			if most > escapePids+1 {
				t.Errorf("ESCAPE: the fork bomb ran %d processes (pids limit %d)", most, escapePids)
			}
			r := w.wait(t, id, 60*time.Second)
			// The run ends at its deadline (bash blocks SIGTERM while it
			// retries a fork, so after the grace period, by SIGKILL), and
			// its whole pid namespace with it.
			if r.status.Status != protocol.StatusTimeout {
				t.Errorf("status %+v, want timeout", r.status)
			}
			deadline := time.Now().Add(5 * time.Second)
			for n := escapeInNS(ns); n != 0; n = escapeInNS(ns) {
				if time.Now().After(deadline) {
					t.Errorf("%d processes of the fork bomb outlived its run", n)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	})

	// The victim ran undisturbed to its end.
	r := w.wait(t, victim, 60*time.Second)
	escapeSucceeded(t, r)
	if string(r.journal) != "victim-start\nsecret\nvictim-end\n" {
		t.Errorf("the victim's journal = %q", r.journal)
	}
	// Its journal shows the file read back at its end; a root worker's
	// workspace is given back after that.
	if b, err := os.ReadFile(filepath.Join(journal.Dir(victimDir).Workspace(), "victim.txt")); err == nil && string(b) != "secret\n" || err != nil && !os.IsNotExist(err) {
		t.Errorf("the victim's workspace file = %q, %v", b, err)
	}
}

// escapeSucceeded: the hostile agent ran to its end and exited 0.
func escapeSucceeded(t *testing.T, r escapeRun) {
	t.Helper()
	// The profile's mounts and limits reach the sandbox through the
	// worker, which must copy them into sandbox.Spec; runner-outer records
	// the spec it got.
	if strings.HasPrefix(r.id, "escape-") && r.id != "escape-victim" &&
		(!strings.Contains(r.state, `\"mounts\":[{`) || !strings.Contains(r.state, `\"limits\":{\"pids\":48`)) {
		t.Fatalf("run %s: the sandbox got no profile mounts or limits: the worker must copy config.Invocation's Mounts, Limits, "+
			"AgentUID and AgentGID (and Config.CgroupParent) into sandbox.Spec (worker/run.go)\nstate:\n%s", r.id, r.state)
	}
	if r.status.Status != protocol.StatusSucceeded {
		t.Fatalf("run %s ended %s (%s), want succeeded\njournal:\n%s\nstate:\n%s", r.id, r.status.Status, r.status.Reason, r.journal, r.state)
	}
}

// escapeInitPID is the host pid of a run's sandbox init, from
// runner-inner's clone-child record.
func escapeInitPID(state string) int {
	m := regexp.MustCompile(`"stage":"inner","phase":"clone-child","status":"ok","detail":"pid (\d+)`).FindStringSubmatch(state)
	if m == nil {
		return 0
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// escapeWatchBomb samples, for d, the processes in a run's pid namespace
// and returns the namespace and the most it saw.
func escapeWatchBomb(t *testing.T, w *escapeWorld, runID string, d time.Duration) (string, int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	pid := 0
	for pid == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("run %s never cloned its sandbox:\n%s", runID, w.file(runID, "state.ndjson"))
		}
		time.Sleep(10 * time.Millisecond)
		pid = escapeInitPID(w.file(runID, "state.ndjson"))
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatalf("the fork bomb's sandbox: %v", err)
	}
	most := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		most = max(most, escapeInNS(ns))
	}
	t.Logf("the fork bomb's namespace held at most %d processes (pids limit %d, plus init)", most, escapePids)
	return ns, most
}

// escapeInNS counts the host's live processes in the pid namespace ns
// (zombies, which run nothing, aside).
func escapeInNS(ns string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || l != ns {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		n++
	}
	return n
}

func escapeWaitFile(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// escapeHostUser is a user of the host's /etc/passwd the sandbox's own
// does not list.
func escapeHostUser(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), ":")
		if name != "" && name != "root" && name != "nobody" && name != "agent" {
			return name
		}
	}
	t.Fatal("the host's /etc/passwd lists no user but root and nobody")
	return ""
}

// escapeResolver is the host's first name server, which the agent tries
// to reach directly.
func escapeResolver() string {
	b, _ := os.ReadFile("/etc/resolv.conf")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "nameserver" {
			return f[1]
		}
	}
	return ""
}
