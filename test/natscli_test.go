package test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
)

// natsCLIModule is the nats CLI the tests use, and docs/quickstart.md
// installs.
const natsCLIModule = "github.com/nats-io/natscli/nats@v0.5.0"

var (
	natsCLIOnce sync.Once
	natsCLIPath string
	natsCLIErr  error
	natsCLIOut  []byte
)

// natsCLI is the `nats` command line tool (natscli), installed from the Go
// module proxy when NATS_CLI_BIN does not name one.
func natsCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NATS_CLI_BIN"); p != "" {
		return p
	}
	natsCLIOnce.Do(func() {
		dir, err := os.MkdirTemp("", "natscli-")
		if err != nil {
			natsCLIErr = err
			return
		}
		cmd := exec.Command("go", "install", natsCLIModule)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
		natsCLIOut, natsCLIErr = testenv.Build(cmd)
		natsCLIPath = filepath.Join(dir, "nats")
	})
	if natsCLIErr != nil {
		t.Fatalf("install the nats CLI (go install %s, or set NATS_CLI_BIN): %v\n%s", natsCLIModule, natsCLIErr, natsCLIOut)
	}
	return natsCLIPath
}

// TestReadmeProtocolWithNatsCLI submits a run with `nats pub` exactly in the
// form of docs/protocol.md (and the README) and watches it with `nats sub`: every line of the journal
// arrives, then one terminal status.
func TestReadmeProtocolWithNatsCLI(t *testing.T) {
	nats := natsCLI(t)
	bin := testenv.BatonBinary(t)
	s := testenv.RunServer(t)
	dir := testenv.StateDir(t)
	e2e.StartWorker(t, bin, s.ClientURL(), dir, "cli")
	_, js := testenv.Connect(t, s)
	waitStream(t, js, protocol.MustNames("").JobsStream())

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out testenv.Buffer
	sub := bounded.Command(ctx, nats, "--server", s.ClientURL(), "sub", "--raw", "baton.runs.run-42.>")
	sub.Stdout, sub.Stderr = &out, os.Stderr
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Process.Kill(); _ = sub.Wait() }()
	time.Sleep(300 * time.Millisecond) // let the subscription reach the server

	pub := bounded.Command(ctx, nats, "--server", s.ClientURL(), "pub", "baton.jobs.run",
		`{"runId":"run-42","profile":"demo","input":"hello"}`, "-H", "Nats-Msg-Id:run-42")
	if b, err := pub.CombinedOutput(); err != nil {
		t.Fatalf("nats pub: %v\n%s", err, b)
	}

	var lines []string
	var statuses []string
	for {
		if ctx.Err() != nil {
			t.Fatalf("no terminal status; statuses %v; output:\n%s", statuses, out.String())
		}
		lines = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		statuses = statuses[:0]
		done := false
		for _, l := range lines {
			if st, ok := asStatus(l, "run-42"); ok {
				statuses = append(statuses, string(st.Status))
				done = done || st.Status.Terminal()
			}
		}
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Join(statuses, ",") != "started,succeeded" {
		t.Fatalf("statuses %v", statuses)
	}
	var events bytes.Buffer
	for _, l := range lines {
		if _, ok := asStatus(l, "run-42"); !ok {
			events.WriteString(l)
			events.WriteByte('\n')
		}
	}
	journal, err := os.ReadFile(filepath.Join(dir, "runs", "run-42", "journal.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(journal, events.Bytes()) || !isSentinelOnly(journal[events.Len():]) {
		t.Fatalf("nats sub saw %d bytes of events; the journal has %d bytes before its sentinel:\n%s", events.Len(), len(journal), events.String())
	}

	// A page of the history through the read relay, in the form of docs/protocol.md:
	// the stored messages with their sequences, then the EOB.
	page := exec.CommandContext(ctx, nats, "--server", s.ClientURL(), "req", "baton.read.events.run-42", `{"from":1,"max":1024}`,
		"--replies", "0", "--timeout", "2s")
	b, err := page.CombinedOutput()
	if !strings.Contains(string(b), "Nats-Sequence: ") || !strings.Contains(string(b), `"status":"succeeded"`) || !strings.Contains(string(b), "Status: 204") {
		t.Fatalf("nats req baton.read.events.run-42: %v\n%s", err, b)
	}

	// Cancelling, in the form of docs/protocol.md: a worker answers, here that the
	// run already ended.
	req := exec.CommandContext(ctx, nats, "--server", s.ClientURL(), "req", "baton.control.cancel.run-42", "")
	b, err = req.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "Nats-Service-Error-Code: 409") {
		t.Fatalf("nats req baton.control.cancel.run-42: %v\n%s", err, b)
	}
}

// asStatus reports whether a line is a status message of runID.
func asStatus(line, runID string) (protocol.Status, bool) {
	st, err := protocol.ParseStatus([]byte(line))
	return st, err == nil && st.RunID == runID && st.Status != ""
}
