package test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// TestOutputsCaptureSurvivesSIGKILL kills the worker holding a run while it
// stores the run's outputs (the diff is stored, the files are not all):
// no terminal status goes out before the outputs are stored, the
// successor captures again, and the one terminal status lists exactly the
// objects the bucket holds for the run, each with its size and digest.
func TestOutputsCaptureSurvivesSIGKILL(t *testing.T) {
	// Runs beside the package's other waiting tests, after its sequential
	// ones: it waits on a run's capture after SIGKILL, bounded far above what
	// it takes, and measures nothing of the machine.
	t.Parallel()
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	dir := testenv.StateDir(t)
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte(`leaseTTL: 2s
profiles:
  make:
    command: [/bin/sh, -c]
    allowArgs: true
    outputs: {diff: true, files: ["out/**"]}
    limits: {outputs: 512MiB}
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
		return p
	}
	first := start("doomed")
	_, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const runID = "sigkill-capture"
	script := `mkdir -p out; i=0; while [ $i -lt 900 ]; do echo "file $i" > out/f$i.txt; i=$((i+1)); done
head -c 30000000 /dev/urandom | base64 > out/big.txt; printf 'one\nTWO\n' > README.md`
	job, _ := json.Marshal(map[string]any{"runId": runID, "profile": "make", "args": []string{script},
		"files": map[string]string{"README.md": "one\ntwo\n"}})
	// The worker provisions the streams; a job published before has no
	// stream to go to.
	testenv.WaitFor(t, 30*time.Second, "the worker to provision the jobs stream", func() bool {
		_, err := js.Stream(ctx, names.JobsStream())
		return err == nil
	})
	msg := nats.NewMsg(names.RunJobSubject())
	msg.Data = job
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 60*time.Second, "the outputs bucket", func() bool {
		_, err := js.ObjectStore(ctx, names.OutputsBucket())
		return err == nil
	})
	obs, err := js.ObjectStore(ctx, names.OutputsBucket())
	if err != nil {
		t.Fatal(err)
	}
	// Killed as soon as the diff is stored: the files are still going in.
	testenv.WaitFor(t, 90*time.Second, "the run's diff in the bucket", func() bool {
		_, err := obs.GetInfo(ctx, runID+"/diff.patch")
		return err == nil
	})
	if !first.Stop(syscall.SIGKILL, 10*time.Second) {
		t.Fatal("worker did not die of SIGKILL")
	}
	started := e2e.LastStatus(t, js, names, runID)
	// Started, or attached again by the same worker after a liveness it
	// lost on a loaded machine: the run had not ended.
	if started.Status.Terminal() {
		t.Fatalf("last status %s at the kill: the test did not test a capture cut short", started.Status)
	}
	start("successor")

	var terminal []protocol.Status
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.StatusSubject(runID)}})
	if err != nil {
		t.Fatal(err)
	}
	for len(terminal) == 0 {
		m, err := cons.Next(jetstream.FetchMaxWait(90 * time.Second))
		if err != nil {
			t.Fatalf("no terminal status: %v", err)
		}
		st, err := protocol.ParseStatus(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.Terminal() {
			terminal = append(terminal, st)
		}
	}
	// Nothing after it (I5).
	if m, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second)); err == nil {
		t.Fatalf("a message after the terminal status: %s", m.Data())
	}
	st := terminal[0]
	if st.Status != protocol.StatusSucceeded || st.Worker == started.Worker || st.OutputsError != "" {
		t.Fatalf("terminal %+v", st)
	}
	if len(st.Outputs) != 1+901 {
		t.Fatalf("the status lists %d outputs, want the diff and 901 files", len(st.Outputs))
	}
	listed := map[string]protocol.Output{}
	for _, o := range st.Outputs {
		listed[o.Name] = o
	}
	infos, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, info := range infos {
		if !strings.HasPrefix(info.Name, runID+"/") {
			continue
		}
		held++
		o, ok := listed[info.Name]
		if !ok || o.Size != info.Size || o.Digest != info.Digest {
			t.Fatalf("bucket object %s (%d bytes, %s) is not as listed: %+v", info.Name, info.Size, info.Digest, o)
		}
	}
	if held != len(listed) {
		t.Fatalf("the bucket holds %d objects of the run, the status lists %d", held, len(listed))
	}
	// As docs/outputs-and-workspaces.md documents it, with the NATS CLI.
	patch := filepath.Join(t.TempDir(), "diff.patch")
	get := exec.CommandContext(ctx, natsCLI(t), "--server", s.ClientURL(), "object", "get", names.OutputsBucket(), runID+"/diff.patch", "-O", patch, "--no-progress")
	if b, err := get.CombinedOutput(); err != nil {
		t.Fatalf("nats object get: %v\n%s", err, b)
	}
	if b, err := os.ReadFile(patch); err != nil || !strings.Contains(string(b), "-two\n+TWO\n") || uint64(len(b)) != listed[runID+"/diff.patch"].Size {
		t.Fatalf("nats object get wrote %d bytes (%v)", len(b), err)
	}
	for _, name := range []string{runID + "/diff.patch", outputs.FileName(runID, "out/big.txt"), outputs.FileName(runID, "out/f899.txt")} {
		b, err := obs.GetBytes(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:]); got != listed[name].Digest {
			t.Fatalf("%s: content digest %s, listed %s", name, got, listed[name].Digest)
		}
	}
}
