package client_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/worker"
)

// Submit a job, then watch its run to the end. An embedded server stands in
// for a deployment, and a few publishes stand in for the worker.
func Example() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()

	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	job := protocol.Job{RunID: "example-1", Profile: "demo", Input: "list the files"}
	if err := c.Submit(ctx, job); err != nil {
		fmt.Println("submit:", err)
		return
	}
	// Submitting the same runId again does not start a second run.
	err = c.Submit(ctx, job)
	fmt.Println("again is a duplicate:", errors.Is(err, client.ErrDuplicate))

	fakeWorker(ctx, js, names, job.RunID)

	st, err := c.Watch(ctx, job.RunID, func(ev client.Event) error {
		if ev.Status != nil {
			fmt.Printf("%-6s %s\n", ev.Kind, ev.Status.Status)
			return nil
		}
		fmt.Printf("%-6s %s (offset %d)\n", ev.Kind, ev.Data, ev.Offset)
		return nil
	})
	if err != nil {
		fmt.Println("watch:", err)
		return
	}
	fmt.Println("exit code:", *st.ExitCode)
	// Output:
	// again is a duplicate: true
	// status started
	// events {"type":"assistant"} (offset 21)
	// raw    plain text (offset 32)
	// status succeeded
	// exit code: 0
}

// fakeWorker publishes what a worker would for a short run.
func fakeWorker(ctx context.Context, js jetstream.JetStream, names protocol.Names, runID string) {
	zero := 0
	for _, m := range []struct {
		subject string
		data    []byte
		offset  int
	}{
		{names.IngestSubject(runID, protocol.KindStatus), protocol.Status{Status: protocol.StatusStarted, RunID: runID}.Marshal(), 0},
		{names.IngestSubject(runID, protocol.KindEvents), []byte(`{"type":"assistant"}`), 21},
		{names.IngestSubject(runID, protocol.KindRaw), []byte("plain text"), 32},
		{names.IngestSubject(runID, protocol.KindStatus), protocol.Status{Status: protocol.StatusSucceeded, RunID: runID, ExitCode: &zero}.Marshal(), 32},
	} {
		msg := nats.NewMsg(m.subject)
		msg.Data = m.data
		msg.Header.Set(protocol.HeaderOffset, fmt.Sprint(m.offset))
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			panic(err)
		}
	}
}

// exampleServer starts an embedded JetStream server with baton's streams and
// buckets, as a worker provisions them on start.
func exampleServer() (jetstream.JetStream, func()) {
	dir, err := os.MkdirTemp("", "baton-example-")
	if err != nil {
		panic(err)
	}
	opts := natsserver.DefaultTestOptions
	opts.Port, opts.JetStream, opts.StoreDir = -1, true, dir
	srv := natsserver.RunServer(&opts)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	if _, err := provision.Ensure(context.Background(), js, protocol.MustNames("baton"), provision.Options{}); err != nil {
		panic(err)
	}
	// Every worker serves the read relay clients read through; here it
	// runs alone.
	stop, err := worker.ServeReadRelay(context.Background(), nc, protocol.MustNames("baton"), zerolog.Nop())
	if err != nil {
		panic(err)
	}
	return js, func() {
		_ = stop()
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		os.RemoveAll(dir)
	}
}

// Send input to a run and interrupt it. With no worker running, the
// request finds nobody to answer it, and says so.
func ExampleClient_Send() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	c, err := client.New(js, protocol.MustNames("baton"))
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	// A Claude Code stream-json run takes user messages as lines.
	line := client.StreamJSONUserMessage("now run the tests")
	fmt.Println(string(line))
	_, err = c.Send(ctx, "example-1", line)
	fmt.Println("no worker:", errors.Is(err, client.ErrNoWorker))
	_, err = c.Interrupt(ctx, "example-1")
	fmt.Println("no worker:", errors.Is(err, client.ErrNoWorker))
	// Output:
	// {"message":{"content":"now run the tests","role":"user"},"parent_tool_use_id":null,"session_id":"default","type":"user"}
	// no worker: true
	// no worker: true
}

// List what a run's capture stored and fetch its diff, checked against the
// digest its terminal status lists.
func ExampleClient_Outputs() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	names := protocol.MustNames("baton")
	c, err := client.New(js, names)
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	fakeCapture(ctx, js, names, "example-2")

	ro, err := c.Outputs(ctx, "example-2")
	if err != nil {
		fmt.Println("outputs:", err)
		return
	}
	for _, o := range ro.Outputs {
		// A file's object is named by its path's digest; Path is the path.
		fmt.Println(cmp.Or(o.Path, o.Name), o.Size)
	}
	var patch strings.Builder
	if err := c.GetOutput(ctx, ro.Outputs[0], &patch); err != nil {
		fmt.Println("get:", err)
		return
	}
	fmt.Print(patch.String())
	// Output:
	// example-2/diff.patch 118
	// out/report.md 5
	// diff --git a/out/report.md b/out/report.md
	// new file mode 100644
	// --- /dev/null
	// +++ b/out/report.md
	// @@ -0,0 +1 @@
	// +done
}

// Upload a repository once and seed a run's workspace with it: the worker
// extracts the archive before the agent starts, and the run's diff shows
// only what the agent changed.
func ExampleClient_PutWorkspaceDir() {
	ctx := context.Background()
	js, stop := exampleServer()
	defer stop()
	c, err := client.New(js, protocol.MustNames("baton"))
	if err != nil {
		fmt.Println("client:", err)
		return
	}
	repo, err := os.MkdirTemp("", "baton-example-repo-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(repo)
	if err := os.WriteFile(filepath.Join(repo, "main.go"), []byte("package main\n"), 0o644); err != nil {
		panic(err)
	}
	name, err := c.PutWorkspaceDir(ctx, repo)
	if err != nil {
		fmt.Println("put:", err)
		return
	}
	// The same tree again is the same object, stored once.
	again, _ := c.PutWorkspaceDir(ctx, repo)
	fmt.Println(strings.HasPrefix(name, "sha256-"), strings.HasSuffix(name, ".tar.gz"), again == name)
	err = c.Submit(ctx, protocol.Job{RunID: "example-3", Profile: "demo", Input: "fix it",
		Workspace: &protocol.WorkspaceRef{Object: name}})
	fmt.Println("submitted:", err == nil)
	// Output:
	// true true true
	// submitted: true
}

// fakeCapture does what a worker does at a run's end: capture its workspace
// into the outputs bucket, then publish the terminal status listing it.
func fakeCapture(ctx context.Context, js jetstream.JetStream, names protocol.Names, runID string) {
	ws, err := os.MkdirTemp("", "baton-example-ws-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(ws)
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "out", "report.md"), []byte("done\n"), 0o644); err != nil {
		panic(err)
	}
	obs, err := js.ObjectStore(ctx, names.OutputsBucket())
	if err != nil {
		panic(err)
	}
	res, err := outputs.Capture(ctx, obs, runID, ws, nil, outputs.Policy{Diff: true, Files: []string{"out/**"}})
	if err != nil {
		panic(err)
	}
	zero := 0
	msg := nats.NewMsg(names.IngestSubject(runID, protocol.KindStatus))
	msg.Data = protocol.Status{Status: protocol.StatusSucceeded, RunID: runID, ExitCode: &zero, Outputs: res.Outputs}.Marshal()
	msg.Header.Set(protocol.HeaderOffset, "0")
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		panic(err)
	}
}
