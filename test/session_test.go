package test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/checkpoint"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestSessionCheckpointSurvivesSIGKILL kills the worker holding a
// session's run while it stores the run's checkpoint (chunks in the
// bucket, the object not yet whole): the session keeps its head (none,
// for a first run) until a successor stores the checkpoint again under
// the same names, publishes the one terminal status naming it and moves
// the head to it; the head restores to exactly what the run left.
func TestSessionCheckpointSurvivesSIGKILL(t *testing.T) {
	// Runs beside the package's other waiting tests, after its sequential
	// ones: it waits on a checkpoint stored after SIGKILL, bounded far above
	// what it takes, and measures nothing of the machine.
	t.Parallel()
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	dir := testenv.StateDir(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte(`leaseTTL: 3s
profiles:
  make:
    command: [/bin/sh, -c]
    allowArgs: true
`), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(id string) *testenv.Proc {
		logs := &testenv.Buffer{}
		cmd := exec.Command(bin, "worker", "--nats", s.ClientURL(), "--state-dir", dir, "--node", "k1",
			"--config", cfg, "--log-format", "json")
		cmd.Stdout, cmd.Stderr = logs, logs
		p := testenv.Start(t, cmd)
		t.Cleanup(func() {
			p.Stop(os.Interrupt, 15*time.Second)
			if t.Failed() {
				t.Logf("worker %s logs:\n%s", id, logs.String())
			}
		})
		testenv.WaitFor(t, 60*time.Second, "worker "+id+" ready", func() bool { return bytes.Contains([]byte(logs.String()), []byte("worker ready")) })
		return p
	}
	first := start("doomed")
	_, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const runID = "sigkill-checkpoint"
	script := `head -c 48000000 /dev/urandom > ~/big; sha256sum ~/big | cut -c1-64; mkdir -p src; i=0; while [ $i -lt 200 ]; do echo "file $i" > src/f$i.txt; i=$((i+1)); done`
	job, _ := json.Marshal(map[string]any{"runId": runID, "profile": "make", "session": "killed", "args": []string{script}})
	msg := nats.NewMsg(names.SessionJobSubject("killed"))
	msg.Data = job
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	cps, err := js.Stream(ctx, "OBJ_"+names.CheckpointsBucket())
	if err != nil {
		t.Fatal(err)
	}
	// Killed once the checkpoint's first chunks are stored.
	testenv.WaitFor(t, 90*time.Second, "the checkpoint's first chunks in the bucket", func() bool {
		info, err := cps.Info(ctx)
		return err == nil && info.State.Msgs > 0
	})
	if !first.Stop(syscall.SIGKILL, 10*time.Second) {
		t.Fatal("worker did not die of SIGKILL")
	}
	if st := e2e.LastStatus(t, js, names, runID); st.Status.Terminal() {
		t.Fatalf("last status %s at the kill: the test did not test a checkpoint cut short", st.Status)
	}
	obs, err := js.ObjectStore(ctx, names.CheckpointsBucket())
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := kv.Open[kv.SessionRecord](ctx, js, names.SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if rec, _, err := sessions.Get(ctx, "killed"); err != nil || rec.Head() != nil || rec.Live != runID {
		t.Fatalf("the session at the kill: %+v (%v): want its run live and no head", rec, err)
	}
	start("successor")

	var rec kv.SessionRecord
	testenv.WaitFor(t, 90*time.Second, "the session's head", func() bool {
		rec, _, err = sessions.Get(ctx, "killed")
		return err == nil && rec.Head() != nil && rec.Live == ""
	})
	st := e2e.LastStatus(t, js, names, runID)
	if st.Status != protocol.StatusSucceeded || st.Checkpoint == nil || st.Checkpoint.Object != rec.Head().Object || st.Checkpoint.Digest != rec.Head().Digest {
		t.Fatalf("terminal status %+v, head %+v", st, rec.Head())
	}
	// The head is whole: restored, it is the run's tree, file for file.
	ws, home := t.TempDir(), t.TempDir()
	wsRoot, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer wsRoot.Close()
	homeRoot, err := os.OpenRoot(home)
	if err != nil {
		t.Fatal(err)
	}
	defer homeRoot.Close()
	m, err := checkpoint.Restore(ctx, obs, rec.Head().Object, checkpoint.Dest{Workspace: wsRoot, Home: homeRoot})
	if err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(filepath.Join(dir, "runs", runID, "journal.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	big, err := os.ReadFile(filepath.Join(home, "big"))
	if sum := sha256.Sum256(big); err != nil || !bytes.HasPrefix(journal, []byte(hex.EncodeToString(sum[:])+"\n")) {
		t.Fatalf("~/big restored (%d bytes, %v) is not the run's, whose SHA-256 it printed: %.70q", len(big), err, journal)
	}
	for _, i := range []int{0, 199} {
		if b, err := os.ReadFile(filepath.Join(ws, "src", fmt.Sprintf("f%d.txt", i))); err != nil || string(b) != fmt.Sprintf("file %d\n", i) {
			t.Fatalf("src/f%d.txt restored: %q, %v", i, b, err)
		}
	}
	if m.Files != 201 || m.TreeBytes < 48000000 {
		t.Fatalf("the head holds %d files, %d bytes", m.Files, m.TreeBytes)
	}
	info, err := obs.GetInfo(ctx, rec.Head().Object)
	if err != nil || info.Digest != rec.Head().Digest || info.Size != rec.Head().Size {
		t.Fatalf("the head's object: %+v, %v", info, err)
	}
}

// A checkpoint over a link of checkpointRate bytes a second: 8 s of it.
const (
	checkpointBytes = 24_000_000
	checkpointRate  = 3_000_000
)

// TestLargeCheckpointKeepsItsLease: a checkpoint that takes longer than
// the lease TTL to store (8 s of a 3 MB/s link, 1 s) is stored at its
// first try: the worker moves it on a connection of its own, so the
// liveness renewals are not queued behind its chunks. On the main
// connection (worker.openTransfers left out) they miss their bound: the
// lease is lost, the checkpoint cancelled and tried again, and no head
// within a minute.
//
// The worker reaches a nats-server process through links of a fixed
// bandwidth each, so the network, not the machine's load, makes the
// checkpoint long: with 500 MB through a server embedded in this -race
// binary, the server itself missed the renewal bound in a fresh-clone CI.
// test/run.sh still runs it after the suite's other packages, alone.
func TestLargeCheckpointKeepsItsLease(t *testing.T) {
	bin := testenv.BatonBinary(t)
	// A nats-server process, built without the race detector (embedded in
	// this -race test binary, the server itself took over a second to
	// answer a renewal while it stored 500 MB, in a fresh-clone CI), which
	// the worker reaches over links of checkpointRate each: a network's
	// bandwidth, not the machine's load, makes the checkpoint long.
	natsProcs := startNATS(t, 1)
	link := throttledLink(t, natsProcs[0].url(), checkpointRate)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte("leaseTTL: 1s\nprofiles:\n  make:\n    command: [/bin/sh, -c]\n    allowArgs: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	cmd := exec.Command(bin, "worker", "--nats", link, "--state-dir", testenv.StateDir(t), "--node", "big",
		"--config", cfg, "--log-format", "json")
	cmd.Stdout, cmd.Stderr = logs, logs
	p := testenv.Start(t, cmd)
	t.Cleanup(func() {
		p.Stop(os.Interrupt, 15*time.Second)
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
	testenv.WaitFor(t, 60*time.Second, "the worker ready", func() bool { return bytes.Contains([]byte(logs.String()), []byte("worker ready")) })
	nc, js := clientOf(t, natsProcs)
	defer nc.Close()
	names := protocol.MustNames("")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const runID = "big-checkpoint"
	job, _ := json.Marshal(map[string]any{"runId": runID, "profile": "make", "session": "big",
		"args": []string{fmt.Sprintf("head -c %d /dev/urandom > ~/big", checkpointBytes)}})
	msg := nats.NewMsg(names.SessionJobSubject("big"))
	msg.Data = job
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	sessions, err := kv.Open[kv.SessionRecord](ctx, js, names.SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the session's head", func() bool {
		rec, _, err := sessions.Get(ctx, "big")
		return err == nil && rec.Head() != nil && rec.Live == ""
	})
	var took float64
	for line := range bytes.Lines([]byte(logs.String())) {
		var l struct {
			Message string
			Took    float64
		}
		if json.Unmarshal(line, &l) == nil && l.Message == "session checkpointed" {
			took = l.Took
		}
		if bytes.Contains(line, []byte("a successor will checkpoint again")) {
			t.Errorf("the checkpoint was cut short: %s", line)
		}
	}
	// Renewals are due every third of the TTL, each within five sixths
	// of it: a checkpoint this long outlasts several.
	if took < 2000 {
		t.Fatalf("the checkpoint took %.0f ms, not two lease TTLs (1s): the test did not test a checkpoint that outlasts renewals", took)
	}
	t.Logf("the checkpoint of %d MB at %d MB/s took %.0f ms, at the first try", checkpointBytes/1_000_000, checkpointRate/1_000_000, took)
	if st := e2e.LastStatus(t, js, names, runID); st.Status != protocol.StatusSucceeded || st.Checkpoint == nil {
		t.Fatalf("terminal status %+v", st)
	}
}

// throttledLink is a TCP proxy to the server at url whose connections each
// carry at most rate bytes a second each way, as links of their own: one
// connection's backlog delays what follows it on that connection only. It
// returns the URL to dial.
func throttledLink(t *testing.T, url string, rate int) string {
	t.Helper()
	addr := strings.TrimPrefix(url, "nats://")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			go throttledCopy(u, c, rate)
			go throttledCopy(c, u, rate)
		}
	}()
	return "nats://" + l.Addr().String()
}

// throttledCopy copies src to dst at most rate bytes a second (bursts of
// a tenth of a second's worth at most), then closes both.
func throttledCopy(dst, src net.Conn, rate int) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 16<<10)
	start, sent := time.Now(), 0
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			sent += n
			// Idle time earns no burst beyond a tenth of a second.
			switch ahead := time.Duration(float64(sent)/float64(rate)*float64(time.Second)) - time.Since(start); {
			case ahead > 0:
				time.Sleep(ahead)
			case ahead < -100*time.Millisecond:
				start, sent = time.Now(), 0
			}
		}
		if err != nil {
			return
		}
	}
}
