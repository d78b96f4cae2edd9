package client_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// The examples below use the helpers of example_test.go: exampleServer
// (an embedded server with baton's streams and buckets and the workers'
// read relay), fakeWorker (what a worker publishes for a short run) and
// fakeCapture (what a worker stores at a run's end).

// The names of one deployment: every subject, stream and bucket a client
// uses comes from its prefix.
func ExampleClient_Names() {
	js, stop := exampleServer()
	defer stop()
	c, err := client.New(js, protocol.MustNames("baton"))
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	n := c.Names()
	fmt.Println(n.RunJobSubject())
	fmt.Println(n.RunFilter("run-42"))
	fmt.Println(n.CancelSubject("run-42"))
	fmt.Println(n.EventsStream(), n.RunsBucket(), n.OutputsBucket())
	// Output:
	// baton.jobs.run
	// baton.runs.run-42.>
	// baton.control.cancel.run-42
	// BATON_EVENTS BATON_RUNS BATON_OUTPUTS
}

// Bound the lines Watch puts back together from chunks; a bound that
// cannot hold a line is refused, not ignored.
func ExampleWithMaxLineBytes() {
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	if _, err := client.New(js, names, client.WithMaxLineBytes(1<<20)); err != nil {
		fmt.Println("client:", err)
		return
	}
	_, err := client.New(js, names, client.WithMaxLineBytes(0))
	fmt.Println("invalid:", errors.Is(err, client.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// invalid: true
	// client: invalid option: max line bytes 0 must be positive
}

// Read one run's record; a runId with no record is ErrNotFound.
func ExampleClient_Run() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	fakeRecord(ctx, js, names, kv.RunRecord{RunID: "example-4", State: kv.RunState(protocol.StatusSucceeded),
		Node: "host1", Profile: "demo", Attempt: 1, Labels: map[string]string{"user": "ada"}})

	rec, err := c.Run(ctx, "example-4")
	if err != nil {
		fmt.Println("run:", err)
		return
	}
	fmt.Println(rec.RunID, rec.State, rec.Profile, rec.Node, rec.Labels["user"])
	_, err = c.Run(ctx, "no-such-run")
	fmt.Println("not found:", errors.Is(err, client.ErrNotFound))
	// Output:
	// example-4 succeeded demo host1 ada
	// not found: true
}

// List every run record, newest first.
func ExampleClient_Runs() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	fakeRecord(ctx, js, names, kv.RunRecord{RunID: "older", State: kv.RunState(protocol.StatusFailed), Profile: "demo", CreatedAt: t0})
	fakeRecord(ctx, js, names, kv.RunRecord{RunID: "newer", State: kv.RunRunning, Profile: "demo", CreatedAt: t0.Add(time.Minute)})

	runs, err := c.Runs(ctx)
	if err != nil {
		fmt.Println("runs:", err)
		return
	}
	for _, r := range runs {
		fmt.Println(r.RunID, r.State, r.CreatedAt.UTC().Format(time.Kitchen))
	}
	// Output:
	// newer running 12:01PM
	// older failed 12:00PM
}

// Ask for a run to be cancelled. A worker answers with the run's record;
// with no worker running the request finds nobody to answer it, and says
// so. A runId that cannot exist is refused before anything is sent.
func ExampleClient_Cancel() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	c, err := client.New(js, protocol.MustNames("baton"))
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	_, err = c.Cancel(ctx, "example-1")
	fmt.Println("no worker:", errors.Is(err, client.ErrNoWorker))
	_, err = c.Cancel(ctx, "not a run id")
	fmt.Println("bad runId:", errors.Is(err, protocol.ErrBadRunID))
	// Output:
	// no worker: true
	// bad runId: true
}

// Read the newest entries of the dead-letter stream: jobs a worker
// rejected, with the reason and the job as it was received.
func ExampleClient_DLQ() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	fakeRejection(ctx, js, names, "r1", `{"runId":"r1","profile":"nope"}`, protocol.ReasonUnknownProfile, `no profile "nope"`)
	fakeRejection(ctx, js, names, "r2", `{"runId":"r2","profile":"demo","colour":"red"}`, protocol.ReasonUnknownField, `unknown field "colour"`)

	entries, err := c.DLQ(ctx, 10)
	if err != nil {
		fmt.Println("dlq:", err)
		return
	}
	for _, e := range entries {
		fmt.Printf("%s %s: %s (%s)\n", e.MsgID, e.Reason, e.Error, e.Payload)
	}
	newest, _ := c.DLQ(ctx, 1)
	fmt.Println("newest:", newest[0].MsgID)
	// Output:
	// r2 unknown_field: unknown field "colour" ({"runId":"r2","profile":"demo","colour":"red"})
	// r1 unknown_profile: no profile "nope" ({"runId":"r1","profile":"nope"})
	// newest: r2
}

// Look an output up by its object name, as a link to it gives it, then
// fetch it with GetOutput.
func ExampleClient_StoredOutput() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	fakeCapture(ctx, js, names, "example-5")

	o, err := c.StoredOutput(ctx, "example-5/diff.patch")
	if err != nil {
		fmt.Println("stored:", err)
		return
	}
	fmt.Println(o.Name, o.Size, strings.HasPrefix(o.Digest, "SHA-256="))
	_, err = c.StoredOutput(ctx, "example-5/nothing")
	fmt.Println("not found:", errors.Is(err, jetstream.ErrObjectNotFound))
	// Output:
	// example-5/diff.patch 118 true
	// not found: true
}

// Write every output of a run under a directory: the diff as
// diff.patch, each file under files/ at its workspace path, each checked
// against its digest before it is renamed into place.
func ExampleClient_SaveOutput() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	fakeCapture(ctx, js, names, "example-6")
	dir, err := os.MkdirTemp("", "baton-example-save-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ro, err := c.Outputs(ctx, "example-6")
	if err != nil {
		fmt.Println("outputs:", err)
		return
	}
	for _, o := range ro.Outputs {
		rel, err := c.SaveOutput(ctx, "example-6", o, dir)
		if err != nil {
			fmt.Println("save:", err)
			return
		}
		fmt.Println(rel)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "files", "out", "report.md"))
	fmt.Print(string(b))
	// Output:
	// diff.patch
	// files/out/report.md
	// done
}

// Tell whether a run's chain is still in the events stream: a run that
// ended long ago has aged out of it (and Watch would wait for events).
func ExampleClient_ChainStored() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	before, _ := c.ChainStored(ctx, "example-7")
	fakeWorker(ctx, js, names, "example-7")
	after, err := c.ChainStored(ctx, "example-7")
	if err != nil {
		fmt.Println("chain:", err)
		return
	}
	fmt.Println(before, after)
	// Output:
	// false true
}

// Upload an archive (a tar, gzipped or not) for a job's workspace. It is
// named by its SHA-256, so the same bytes are stored once.
func ExampleClient_PutWorkspace() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	c, err := client.New(js, protocol.MustNames("baton"))
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	archive := tarGz(map[string]string{"main.go": "package main\n"})

	name, err := c.PutWorkspace(ctx, bytes.NewReader(archive))
	if err != nil {
		fmt.Println("put:", err)
		return
	}
	again, _ := c.PutWorkspace(ctx, bytes.NewReader(archive))
	fmt.Println(strings.HasPrefix(name, "sha256-"), strings.HasSuffix(name, ".tar.gz"), again == name)
	err = c.Submit(ctx, protocol.Job{RunID: "example-8", Profile: "demo", Input: "fix it",
		Workspace: &protocol.WorkspaceRef{Object: name}})
	fmt.Println("submitted:", err == nil)
	// Output:
	// true true true
	// submitted: true
}

// fakeRecord writes a run record as a worker does when it creates a run.
func fakeRecord(ctx context.Context, js jetstream.JetStream, names protocol.Names, rec kv.RunRecord) {
	runs, err := kv.Open[kv.RunRecord](ctx, js, names.RunsBucket())
	if err != nil {
		panic(err)
	}
	if _, err := runs.Create(ctx, rec.RunID, rec); err != nil {
		panic(err)
	}
}

// fakeRejection publishes what a worker's intake does with a job it
// cannot run: the job, with its reason, on the dead-letter stream.
func fakeRejection(ctx context.Context, js jetstream.JetStream, names protocol.Names, runID, job string, reason protocol.Reason, why string) {
	msg := nats.NewMsg(names.DLQSubject(reason))
	msg.Data = []byte(job)
	msg.Header.Set(protocol.HeaderReason, string(reason))
	msg.Header.Set(protocol.HeaderError, why)
	msg.Header.Set(protocol.HeaderOrigSubject, names.RunJobSubject())
	msg.Header.Set(protocol.HeaderOrigMsgID, runID)
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		panic(err)
	}
}

// tarGz is a gzipped tar of files.
func tarGz(files map[string]string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			panic(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			panic(err)
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Run a run's job again as a new run: the job its record keeps (every
// job up to protocol.MaxKeptJob). A record that keeps none says so.
func ExampleClient_Rerun() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	job, err := protocol.EncodeWorkerJob(protocol.Job{RunID: "nightly-1", Profile: "demo", Input: "run the suite",
		Labels: map[string]string{"team": "a", protocol.LabelAttempt: "2"}})
	if err != nil {
		fmt.Println("encode:", err)
		return
	}
	fakeRecord(ctx, js, names, kv.RunRecord{RunID: "nightly-1", State: kv.RunState(protocol.StatusFailed), Profile: "demo", Job: job})
	fakeRecord(ctx, js, names, kv.RunRecord{RunID: "jobless", State: kv.RunState(protocol.StatusFailed), Profile: "demo"})

	again, err := c.Rerun(ctx, "nightly-1", "nightly-1-b")
	if err != nil {
		fmt.Println("rerun:", err)
		return
	}
	fmt.Println(again.RunID, again.Profile, again.Input, again.Labels) // baton's own labels dropped
	_, err = c.Rerun(ctx, "jobless", "jobless-b")
	fmt.Println("no job:", errors.Is(err, client.ErrNoJob))
	// Output:
	// nightly-1-b demo run the suite map[team:a]
	// no job: true
}

// Find why a run has no record: the dead letter of its job, if a worker
// rejected it. A Rejections reads the stream once, then only what was
// added, so it serves many questions.
func ExampleClient_Rejections() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	fakeRejection(ctx, js, names, "r1", `{"runId":"r1","profile":"nope"}`, protocol.ReasonUnknownProfile, `no profile "nope"`)
	rejections := c.Rejections()
	for _, id := range []string{"r1", "r2"} {
		e, ok, err := rejections.Of(ctx, id, time.Time{})
		if err != nil {
			fmt.Println("rejections:", err)
			return
		}
		fmt.Println(id, ok, e.Reason, e.Error)
	}
	// Output:
	// r1 true unknown_profile no profile "nope"
	// r2 false
}

// Answer a permission prompt the run's policy asked a person about: allow
// it, or deny it with a reason for the agent. A request decided before is
// ErrApprovalConflict, with the record saying who decided it and when.
// With no worker running, the request finds nobody to answer it, and says
// so.
func ExampleClient_Approve() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	c, err := client.New(js, protocol.MustNames("baton"))
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	a, err := c.Approve(ctx, "example-1", "512b6ed9-0c4e-4b8f-9d1e-6a2b3c4d5e6f", client.WithDecidedBy("ada"))
	switch {
	case errors.Is(err, client.ErrApprovalConflict):
		fmt.Printf("decided before: %s by %s\n", a.State, a.DecidedBy)
	case err != nil:
		fmt.Println("no worker:", errors.Is(err, client.ErrNoWorker))
	default:
		fmt.Println(a.State)
	}
	_, err = c.Approve(ctx, "example-1", "7f3e2a10-5b6c-4d7e-8f90-a1b2c3d4e5f6", client.WithDeny("not on main"), client.WithDecidedBy("ada"))
	fmt.Println("no worker:", errors.Is(err, client.ErrNoWorker))
	_, err = c.Approvals(ctx, protocol.ApprovalsQuery{Pending: true})
	fmt.Println("no worker:", errors.Is(err, client.ErrNoWorker))
	// Output:
	// no worker: true
	// no worker: true
	// no worker: true
}

// Follow the approvals of every run as the workers publish them: each
// change of a record (asked, decided, held, answered) is a notice. A
// publish stands in for the worker.
func ExampleClient_WatchApprovals() {
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.WatchApprovals(ctx, "", func(a protocol.Approval) error {
		fmt.Printf("%s %s: %s %s (%s) %s\n", a.RunID, a.ID, a.Tool, a.Target, a.Rule, a.State)
		if a.State != protocol.ApprovalPending {
			cancel() // enough for the example
		}
		return nil
	}, client.OnSubscribed(func() error {
		// Subscribed: the moment to list the records (c.Approvals) so
		// nothing is missed; here, the worker asks and a person allows.
		a := protocol.Approval{RunID: "example-1", ID: "512b6ed9-0c4e-4b8f-9d1e-6a2b3c4d5e6f", Agent: "claude", Tool: "Bash", Target: "git push",
			Verdict: "ask", Rule: "ask: Bash(git push*)", State: protocol.ApprovalPending, AskedAt: time.Now()}
		b, _ := json.Marshal(a)
		_ = js.Conn().Publish(names.ApprovalNoticeSubject(a.RunID), b)
		a.State, a.DecidedBy = protocol.ApprovalAllowed, "ada"
		b, _ = json.Marshal(a)
		return js.Conn().Publish(names.ApprovalNoticeSubject(a.RunID), b)
	}))
	fmt.Println("ended:", errors.Is(err, context.Canceled))
	// Output:
	// example-1 512b6ed9-0c4e-4b8f-9d1e-6a2b3c4d5e6f: Bash git push (ask: Bash(git push*)) pending
	// example-1 512b6ed9-0c4e-4b8f-9d1e-6a2b3c4d5e6f: Bash git push (ask: Bash(git push*)) allowed
	// ended: true
}

// Read the queue of the concurrency keys: each key's running jobs against
// its limit, and its first waiting jobs in the order they will start,
// with why each waits. A subscription stands in for the workers' queue
// endpoint here.
func ExampleClient_Queue() {
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	ctx := context.Background()
	_, err = c.Queue(ctx)
	fmt.Println("no worker:", errors.Is(err, client.ErrNoWorker))

	// What a worker answers: the keys of the request's body, {"key":"acme"}.
	sub, _ := js.Conn().Subscribe(names.ReadQueueSubject(), func(m *nats.Msg) {
		var req protocol.QueueRequest
		_ = json.Unmarshal(m.Data, &req)
		b, _ := json.Marshal(protocol.QueueView{FreeSlots: 0, Workers: 2, Keys: []protocol.KeyQueue{
			{Key: req.Key, Running: 2, Limit: 2, Weight: 1, Waiting: 2, Jobs: []protocol.QueuedJob{
				{RunID: "example-7", Profile: "claude", Priority: 5, Position: 1, Since: time.Now(), Reason: protocol.WaitKeyLimit},
				{RunID: "example-5", Profile: "claude", Priority: 3, Position: 2, Since: time.Now(), Reason: protocol.WaitBehind},
			}},
		}})
		_ = m.Respond(b)
	})
	defer sub.Unsubscribe()

	v, err := c.Queue(ctx, client.WithQueueKey("acme"), client.WithQueueLimit(20))
	if err != nil {
		fmt.Println("queue:", err)
		return
	}
	for _, k := range v.Keys {
		fmt.Printf("%s: %d/%d running, %d waiting\n", k.Key, k.Running, k.Limit, k.Waiting)
		for _, j := range k.Jobs {
			fmt.Printf("  %d. %s (%s, priority %d): %s\n", j.Position, j.RunID, j.Profile, j.Priority, j.Reason)
		}
	}
	_, err = c.Queue(ctx, client.WithQueueKey("not.a.key"))
	fmt.Println("invalid:", errors.Is(err, client.ErrInvalidOption))
	// Output:
	// no worker: true
	// acme: 2/2 running, 2 waiting
	//   1. example-7 (claude, priority 5): key at its limit
	//   2. example-5 (claude, priority 3): behind its key's earlier jobs
	// invalid: true
}
