package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox"
	"github.com/batonhq/baton/sandbox/runspec"
)

// prestart starts a chain shaped as spec in the entry .pool-<name> beside
// spec's run directory, closed when the test ends.
func prestart(t testing.TB, bin string, spec sandbox.Spec, name string) *sandbox.Prestarted {
	t.Helper()
	needSandbox(t)
	shape := spec
	shape.RunID = "pool-" + name
	shape.RunDir = filepath.Join(filepath.Dir(spec.RunDir), sandbox.PoolEntryPrefix+name)
	shape.Files, shape.Nonce = nil, randomHex(t, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := sandbox.Prestart(ctx, shape, sandbox.WithBinary(bin))
	if err != nil {
		t.Fatalf("Prestart: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// settled waits until p's exec stage waits for its spec: all a chain
// does before its take is done, as in a pool filled before its jobs.
func settled(t testing.TB, p *sandbox.Prestarted) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(readFile(t, p.Dir().State()), `"phase":"exec-stage"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the prestarted chain's exec stage is not waiting after 10 s:\n%s", readFile(t, p.Dir().State()))
		}
		time.Sleep(time.Millisecond)
	}
}

// kill SIGKILLs p's runner before its take, and waits until it has exited.
func kill(t testing.TB, p *sandbox.Prestarted) {
	t.Helper()
	killRunner(p.Dir())
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("a killed prestarted runner is still alive after 10 s")
	}
}

// take runs spec on p, and makes sure no runner outlives the test.
func take(t testing.TB, p *sandbox.Prestarted, spec sandbox.Spec, input string) journal.Dir {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := p.Take(ctx, spec, []byte(input))
	if err != nil {
		t.Fatalf("Take: %v\nstate:\n%s", err, readFile(t, filepath.Join(spec.RunDir, journal.StateName)))
	}
	if r.PID <= 0 {
		t.Fatalf("Take returned pid %d", r.PID)
	}
	dir := journal.Dir(spec.RunDir)
	t.Cleanup(func() { killRunner(dir) })
	return dir
}

// TestPrestartedRun runs agents on prestarted chains, with each runner
// build: a runner that hands over to runner-outer-wait before its take,
// one that stays, and one whose init leaves reaping to the kernel.
func TestPrestartedRun(t *testing.T) {
	t.Parallel()
	builds := map[string]func(testing.TB) string{
		"default": runnerBinary, "staying": stayingRunnerBinary, "kernel": kernelRunnerBinary,
	}
	for name, bin := range builds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spec := newSpec(t, sh(`echo "argv $0 $1"; echo "env $GREETING"; cat; cat seed.txt; echo "cwd $PWD"; exit 5`)...)
			spec.Argv = append(spec.Argv, "agent", "one")
			spec.Env = append(spec.Env, "GREETING=hello")
			spec.Files = map[string]string{"seed.txt": "seeded\n"}
			p := prestart(t, bin(t), spec, randomHex(t, 4))
			pooled := p.Dir()
			if !p.Alive() {
				t.Fatal("a prestarted chain is not alive before its take")
			}
			// Built ahead: the deadline and the take come later.
			spec.Deadline = time.Now().Add(30 * time.Second)
			dir := take(t, p, spec, "from stdin\n")
			stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
			// Where a cold run's is: /workspace, whatever the entry.
			want := "argv agent one\nenv hello\nfrom stdin\nseeded\ncwd /workspace\n"
			if stdout != want {
				t.Errorf("journal before the sentinel = %q, want %q\nstate:\n%s", stdout, want, readFile(t, dir.State()))
			}
			wantSentinel(t, s, 5, journal.ReasonExit, "")
			if _, err := os.Lstat(string(pooled)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the entry's directory is still there after its take: %v", err)
			}
			state := readFile(t, dir.State())
			for _, rec := range []string{`"stage":"outer","phase":"pool-ready"`, `"stage":"outer","phase":"take"`, `"phase":"start-agent"`} {
				if !strings.Contains(state, rec) {
					t.Errorf("state.ndjson has no %s record:\n%s", rec, state)
				}
			}
			if p.Alive() {
				t.Error("a taken chain is still offered")
			}
		})
	}
}

// TestPrestartedClose discards an untaken chain: its runner ends, nothing
// of it stays, and no journal was ever written.
func TestPrestartedClose(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, "/bin/true")
	p := prestart(t, runnerBinary(t), spec, randomHex(t, 4))
	dir := p.Dir()
	if alive, err := sandbox.Alive(dir); err != nil || !alive {
		t.Fatalf("Alive(entry) = %v, %v before Close", alive, err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Lstat(string(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the entry's directory stays after Close: %v", err)
	}
	if p.Alive() {
		t.Error("a closed entry is alive")
	}
	if _, err := p.Take(context.Background(), spec, nil); !errors.Is(err, sandbox.ErrPoolEntryGone) {
		t.Errorf("Take of a closed entry = %v, want ErrPoolEntryGone", err)
	}
}

// TestPrestartedRefusals: a spec of another shape leaves the entry
// untouched for the next; a chain killed before its take is gone; a run
// directory that exists is refused.
func TestPrestartedRefusals(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh("echo ok")...)
	p := prestart(t, runnerBinary(t), spec, randomHex(t, 4))
	other := newSpec(t, sh("echo ok")...)
	other.RunDir = filepath.Join(filepath.Dir(spec.RunDir), other.RunID)
	for name, mod := range map[string]func(*sandbox.Spec){
		"network":   func(s *sandbox.Spec) { s.Network.Allow = []string{"api.example.com"} },
		"limits":    func(s *sandbox.Spec) { s.Limits.Pids = 7 },
		"binary":    func(s *sandbox.Spec) { s.Argv = []string{"/bin/echo", "ok"} },
		"home":      func(s *sandbox.Spec) { s.Env = append(s.Env, "HOME=/tmp") },
		"runs dir":  func(s *sandbox.Spec) { s.RunDir = filepath.Join(t.TempDir(), s.RunID) },
		"agent ids": func(s *sandbox.Spec) { s.AgentUID = 1234 },
	} {
		s := other
		s.Env = append([]string(nil), other.Env...)
		mod(&s)
		if _, err := p.Take(context.Background(), s, nil); !errors.Is(err, sandbox.ErrNotPooled) {
			t.Errorf("%s: Take = %v, want ErrNotPooled", name, err)
		}
	}
	if err := os.Mkdir(other.RunDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Take(context.Background(), other, nil); !errors.Is(err, sandbox.ErrRunExists) {
		t.Errorf("Take onto an existing run directory = %v, want ErrRunExists", err)
	}
	// That take closed the entry; the next is killed before its take.
	q := prestart(t, runnerBinary(t), spec, randomHex(t, 4))
	kill(t, q)
	if _, err := q.Take(context.Background(), spec, nil); !errors.Is(err, sandbox.ErrPoolEntryGone) {
		t.Errorf("Take of a killed chain = %v, want ErrPoolEntryGone", err)
	}
	if _, err := os.Lstat(spec.RunDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused take left the run directory: %v", err)
	}
}

// TestPrestartedRespawn: a worker that dies between renaming an entry to
// its run and handing it the take leaves a run directory without a
// journal, whose runner ends on the socket's close; Respawn then starts
// the run cold there, as any run whose runner never took it.
func TestPrestartedRespawn(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh(`cat; echo cold`)...)
	p := prestart(t, runnerBinary(t), spec, randomHex(t, 4))
	entry := p.Dir()
	for path, b := range map[string][]byte{entry.Spec(): mustJSON(t, spec), entry.Input(): []byte("input\n")} {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(string(entry), spec.RunDir); err != nil {
		t.Fatal(err)
	}
	dir := journal.Dir(spec.RunDir)
	_ = p.Close() // the worker's death: the socket closes
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive, err := sandbox.Alive(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the untaken runner still holds the run 10 s after its socket closed:\n%s", readFile(t, dir.State()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := os.Lstat(dir.Journal()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the untaken runner left a journal: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := sandbox.Respawn(ctx, dir, sandbox.WithBinary(runnerBinary(t))); err != nil {
		t.Fatalf("Respawn: %v\nstate:\n%s", err, readFile(t, dir.State()))
	}
	t.Cleanup(func() { killRunner(dir) })
	stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
	if stdout != "input\ncold\n" {
		t.Errorf("journal = %q", stdout)
	}
	wantSentinel(t, s, 0, journal.ReasonExit, "")
}

// TestRemoveStalePoolEntries removes a killed chain's entry once settled,
// and keeps a live one's.
func TestRemoveStalePoolEntries(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, "/bin/true")
	live := prestart(t, runnerBinary(t), spec, randomHex(t, 4))
	dead := prestart(t, runnerBinary(t), spec, randomHex(t, 4))
	kill(t, dead)
	runs := filepath.Dir(spec.RunDir)
	if err := sandbox.RemoveStalePoolEntries(runs, time.Hour); err != nil {
		t.Fatalf("RemoveStalePoolEntries: %v", err)
	}
	if _, err := os.Lstat(string(dead.Dir())); err != nil {
		t.Errorf("a dead entry younger than the settling time was removed: %v", err)
	}
	if err := sandbox.RemoveStalePoolEntries(runs, 0); err != nil {
		t.Fatalf("RemoveStalePoolEntries: %v", err)
	}
	if _, err := os.Lstat(string(dead.Dir())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dead entry stays: %v", err)
	}
	if _, err := os.Lstat(string(live.Dir())); err != nil {
		t.Errorf("a live entry was removed: %v", err)
	}
	if !live.Alive() {
		t.Error("the live entry's chain ended")
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPrestartedRunsAsCold: the output limit, which the take sets, holds
// on a prestarted chain as on a cold one, and a names-only network's proxy
// serves it. (TestCancel, TestMissingAgentIsAnError and
// TestDeadlineStopsAgentAndChildren run on prestarted chains too.)
func TestPrestartedRunsAsCold(t *testing.T) {
	t.Parallel()
	t.Run("output limit", func(t *testing.T) {
		t.Parallel()
		const limit = 64 << 10
		spec := newSpec(t, sh("yes 0123456789abcdefghi")...)
		p := prestart(t, runnerBinary(t), spec, randomHex(t, 4))
		spec.Limits.Output = limit // the journal's, set at the take
		dir := take(t, p, spec, "")
		stdout, s := waitEnd(t, dir, spec.Nonce, 10*time.Second)
		if len(stdout) != limit+1 {
			t.Errorf("journal holds %d bytes before the sentinel, want %d", len(stdout), limit+1)
		}
		wantSentinel(t, s, 137, journal.ReasonOutputLimit, "KILL")
	})
	t.Run("proxy", func(t *testing.T) {
		t.Parallel()
		host := helloHost(t)
		spec := newSpec(t, sh(fmt.Sprintf(`echo "proxy=$(curl -sS -m 5 http://th.test:%d/ 2>&1)"`, host.Port))...)
		spec.Network = runspec.Network{Allow: []string{"th.test"}, Hosts: map[string]string{"th.test": host.Addr.String()}}
		p := prestart(t, runnerBinary(t), spec, randomHex(t, 4))
		dir := take(t, p, spec, "")
		stdout, s := waitEnd(t, dir, spec.Nonce, 20*time.Second)
		wantSentinel(t, s, 0, journal.ReasonExit, "")
		// The proxy answered, refusing the private address the name is
		// pinned to without a CIDR entry, as on a cold run.
		if !strings.Contains(stdout, "baton egress proxy") || !strings.Contains(stdout, "private address") {
			t.Errorf("journal = %q, want the egress proxy's refusal", stdout)
		}
	})
}

// TestPrestartedLastWord: the WithBeforeSpawn function of a take (the
// worker's spawning mark) is called once the run's directory is in place,
// as Start's is, so a worker killed right after its mark leaves a run its
// node's recovery finds (the chaos suite lost one when the rename came
// after the mark); one that refuses leaves neither the run's directory
// nor the entry's, and no runner.
func TestPrestartedLastWord(t *testing.T) {
	t.Parallel()
	spec := newSpec(t, sh(`cat`)...)
	p := prestart(t, runnerBinary(t), spec, randomHex(t, 4))
	entry := p.Dir()
	var sawSpec error
	refusal := errors.New("another worker took the run")
	_, err := p.Take(context.Background(), spec, nil, sandbox.WithBeforeSpawn(func() error {
		_, sawSpec = os.Stat(journal.Dir(spec.RunDir).Spec())
		return refusal
	}))
	if !errors.Is(err, refusal) {
		t.Fatalf("Take = %v, want the last word's refusal", err)
	}
	if sawSpec != nil {
		t.Errorf("at the last word the run's directory was not in place: %v", sawSpec)
	}
	for _, d := range []string{spec.RunDir, string(entry)} {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s stays after a refused take: %v", d, err)
		}
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the refused entry's runner still runs 10 s after the take")
	}
}
