package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/internal/bounded"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
	"github.com/batonhq/baton/worker"
)

// TestNATSPermissions runs baton under deploy/nats-auth.conf as shipped: a
// worker, a client and a viewer, each with its own user. Every command a
// client has (submit, watch, runs, cancel, dlq) works with no permission
// refused; the viewer's live feed gets a run; and every attack of issue 13
// (docs/security.md), tried as client and as viewer, is refused and leaves
// nothing changed.
func TestNATSPermissions(t *testing.T) {
	bin := testenv.BatonBinary(t)
	pw := map[string]string{"worker": "w-secret", "worker-svc": "s-secret", "client": "c-secret", "viewer": "v-secret", "tools": "t-secret"}
	for user, p := range pw {
		t.Setenv(passwordVar(user), p)
	}
	s := testenv.RunShipped(t, testenv.ShippedConfig(t, "../..", t.TempDir(), "nats-auth.conf", nil))
	url := func(user string) string {
		return fmt.Sprintf("nats://%s:%s@%s", user, pw[user], strings.TrimPrefix(s.ClientURL(), "nats://"))
	}
	names := protocol.MustNames("")

	connect := func(user string, opts ...nats.Option) *conn {
		c := &conn{}
		nc, err := nats.Connect(url(user), append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				c.mu.Lock()
				c.denied = append(c.denied, err.Error())
				c.mu.Unlock()
			}
		}))...)
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		c.nc = nc
		return c
	}
	waitDenied := func(c *conn, what, subject string) {
		t.Helper()
		testenv.WaitFor(t, 5*time.Second, "a permissions violation for "+what+" "+subject, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, d := range c.denied {
				if strings.Contains(d, what) && strings.Contains(d, subject+`"`) {
					return true
				}
			}
			return false
		})
	}
	deniedPublish := func(c *conn, subject string, body []byte) {
		t.Helper()
		// With a reply subject, as a JetStream API request is sent.
		if err := c.nc.PublishRequest(subject, c.nc.NewRespInbox(), body); err != nil {
			t.Fatal(err)
		}
		waitDenied(c, "Publish", subject)
	}
	deniedSubscribe := func(c *conn, subject string) {
		t.Helper()
		sub, err := c.nc.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		waitDenied(c, "Subscription", subject)
	}

	stateDir := testenv.StateDir(t)
	// A profile whose runs' outputs are captured, for `baton outputs`.
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte("keyConcurrency: {default: 1}\nprofiles:\n  out:\n    command: [/bin/sh, -c]\n    allowArgs: true\n    outputs: {diff: true, files: [\"out/**\"]}\n"+
		"  tools:\n    command: [\"{baton}\", mcp]\n    tools: [deploy]\n"+
		"  guarded:\n    command: [\"{baton}\", fake-agent, --chat]\n    stdin: stream\n    policy: {default: ask}\n    askTimeout: 2m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	workerLog := e2e.StartWorker(t, bin, url("worker"), stateDir, "auth", "--config", cfg, "--service-nats", url("worker-svc"))
	viewer := connect("viewer")
	live := make(chan *nats.Msg, 1024)
	if _, err := viewer.nc.ChanSubscribe(names.RunFilter("auth-1"), live); err != nil {
		t.Fatal(err)
	}
	if err := viewer.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	submit := bounded.Command(ctx, bin, "submit", "--nats", url("client"), "--profile", "demo", "--run-id", "auth-1", "--watch")
	var out bytes.Buffer
	submit.Stdout, submit.Stderr = &out, &out
	if err := submit.Run(); err != nil {
		t.Fatalf("submit --watch as client: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "Permissions Violation") {
		t.Fatalf("submit --watch as client was refused something:\n%s", out.String())
	}
	// baton as client: each command works, and is refused nothing.
	asClient := func(wantExit int, args ...string) string {
		t.Helper()
		cmd := bounded.Command(ctx, bin, append(args, "--nats", url("client"))...)
		b, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != wantExit || strings.Contains(string(b), "Permissions Violation") {
			t.Fatalf("baton %s as client: exit %d (%v), want %d\n%s", strings.Join(args, " "), code, err, wantExit, b)
		}
		return string(b)
	}
	// A keyed job: published on its key's lane, run under one of the
	// key's slots, which the worker gives back; the queue view gathers
	// the worker's load.
	if o := asClient(0, "submit", "--profile", "demo", "--run-id", "auth-key", "--key", "acme", "--watch"); !strings.Contains(o, "succeeded") {
		t.Fatalf("a keyed submit --watch as client:\n%s", o)
	}
	var view protocol.QueueView
	if o := asClient(0, "queue", "--json"); json.Unmarshal([]byte(o), &view) != nil || view.Workers != 1 || view.FreeSlots < 1 {
		t.Fatalf("queue --json as client: want the one worker's load\n%s", o)
	}
	asClient(0, "runs", "get", "auth-1")
	if o := asClient(0, "runs"); !strings.Contains(o, "auth-1") {
		t.Fatalf("runs as client does not list auth-1:\n%s", o)
	}
	asClient(0, "watch", "auth-1")
	asClient(0, "dlq")
	// Approvals: listed, and answered (auth-1 ended: the worker says
	// so), each request reaching a worker as client.
	if o := asClient(0, "approvals", "list", "--pending"); !strings.Contains(o, "no pending approvals") {
		t.Fatalf("approvals list as client:\n%s", o)
	}
	if o := asClient(1, "approve", "auth-1", "req-1"); !strings.Contains(o, "run auth-1 ended: nothing waits on approval req-1 any more") {
		t.Fatalf("approve as client:\n%s", o)
	}
	// A bad job reaches the DLQ, which the client reads.
	asClient(0, "submit", "--profile", "no-such-profile", "--run-id", "auth-bad")
	testenv.WaitFor(t, 10*time.Second, "auth-bad in the DLQ", func() bool {
		b, _ := bounded.Command(ctx, bin, "dlq", "--nats", url("client")).CombinedOutput()
		return strings.Contains(string(b), "auth-bad")
	})
	// dlq retry is a submission, which the client may make; dlq delete
	// administers the DLQ stream, which it may not: refused, said, and
	// the entry is still there.
	var dead []struct {
		Seq   uint64 `json:"seq"`
		MsgID string `json:"msgId"`
	}
	if o := asClient(0, "dlq", "--json"); json.Unmarshal([]byte(o), &dead) != nil || len(dead) != 1 || dead[0].MsgID != "auth-bad" {
		t.Fatalf("dlq --json as client:\n%s", o)
	}
	seq := fmt.Sprint(dead[0].Seq)
	if o := asClient(0, "dlq", "retry", seq); !strings.Contains(o, "again as run auth-bad") {
		t.Fatalf("dlq retry as client:\n%s", o)
	}
	del := bounded.Command(ctx, bin, "dlq", "delete", seq, "--nats", url("client"))
	if b, _ := del.CombinedOutput(); del.ProcessState.ExitCode() != 1 ||
		!strings.Contains(string(b), `Permissions Violation for Publish to "$JS.API.STREAM.INFO.`+names.DLQStream()+`"`) ||
		!strings.Contains(string(b), "needs a NATS user that may administer stream "+names.DLQStream()) {
		t.Fatalf("dlq delete as client: exit %d, want 1 with the refusal said\n%s", del.ProcessState.ExitCode(), b)
	}
	if o := asClient(0, "dlq", "--json"); !strings.Contains(o, `"seq": `+seq+",") {
		t.Fatalf("dlq entry %s gone after a refused delete:\n%s", seq, o)
	}
	asClient(0, "submit", "--profile", "demo", "--run-id", "auth-long", "--arg=--lines", "--arg=100000", "--arg=--rate", "--arg=5")
	testenv.WaitFor(t, 20*time.Second, "auth-long running", func() bool {
		b, _ := bounded.Command(ctx, bin, "runs", "get", "auth-long", "--nats", url("client")).CombinedOutput()
		return strings.Contains(string(b), "running")
	})
	if o := asClient(0, "cancel", "auth-long"); !strings.Contains(o, "cancel requested") {
		t.Fatalf("cancel as client:\n%s", o)
	}
	if o := asClient(1, "watch", "auth-long"); !strings.Contains(o, "cancelled") {
		t.Fatalf("watch of the cancelled run:\n%s", o)
	}
	if o := asClient(1, "cancel", "auth-long"); !strings.Contains(o, "already ended") {
		t.Fatalf("cancel of an ended run as client:\n%s", o)
	}

	// Approvals: the worker records a prompt its policy asks about and
	// publishes its notice, which the viewer follows; the client lists
	// and answers it, and the worker writes the answer to the agent.
	notices := make(chan *nats.Msg, 16)
	if _, err := viewer.nc.ChanSubscribe(names.ApprovalNotices(), notices); err != nil {
		t.Fatal(err)
	}
	if err := viewer.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	asClient(0, "submit", "--profile", "guarded", "--run-id", "auth-appr", "--input", "approve: make test")
	testenv.WaitFor(t, 20*time.Second, "auth-appr's approval pending", func() bool {
		b, _ := bounded.Command(ctx, bin, "approvals", "list", "--pending", "--nats", url("client")).CombinedOutput()
		return strings.Contains(string(b), "auth-appr") && strings.Contains(string(b), "make test")
	})
	if o := asClient(0, "approve", "auth-appr", "req-1", "--by", "ana"); !strings.Contains(o, "allowed req-1 of run auth-appr") {
		t.Fatalf("approve as client:\n%s", o)
	}
	testenv.WaitFor(t, 20*time.Second, "auth-appr's answer written, and its notices to the viewer", func() bool {
		for {
			select {
			case m := <-notices:
				var a protocol.Approval
				if json.Unmarshal(m.Data, &a) == nil && a.RunID == "auth-appr" && a.DecidedBy == "ana" && a.AnswerSeq > 0 {
					return true
				}
			default:
				return false
			}
		}
	})
	asClient(0, "send", "auth-appr", "--eof")
	if o := asClient(0, "watch", "auth-appr"); !strings.Contains(o, "[decision] allow Bash by ana") {
		t.Fatalf("watch of the approved run:\n%s", o)
	}

	// Outputs: the worker stores them, the client lists and fetches them.
	asClient(0, "submit", "--profile", "out", "--run-id", "auth-out", "--arg=mkdir out; echo report > out/r.txt", "--watch")
	if o := asClient(0, "outputs", "auth-out"); !strings.Contains(o, "auth-out/diff.patch") || !strings.Contains(o, outputs.FileName("auth-out", "out/r.txt")) || !strings.Contains(o, " out/r.txt ") {
		t.Fatalf("outputs as client:\n%s", o)
	}
	got := t.TempDir()
	asClient(0, "outputs", "auth-out", "--get", "all", "-o", got)
	if b, err := os.ReadFile(filepath.Join(got, "files", "out", "r.txt")); err != nil || string(b) != "report\n" {
		t.Fatalf("outputs --get all as client: %q, %v", b, err)
	}

	// Workspaces: the client uploads an archive, the worker seeds a run
	// from it (reading BATON_WORKSPACES within its permissions).
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "seeded.txt"), []byte("from the archive\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	asClient(0, "submit", "--profile", "out", "--run-id", "auth-ws", "--workspace", repo,
		"--arg=test \"$(cat seeded.txt)\" = 'from the archive' && echo changed >> seeded.txt", "--watch")
	if o := asClient(0, "outputs", "auth-ws", "--get", "diff.patch", "-o", got); !strings.Contains(o, "diff.patch") {
		t.Fatalf("outputs of the seeded run:\n%s", o)
	}

	// The viewer's live feed had the whole run, ending with its status.
	var last *nats.Msg
	testenv.WaitFor(t, 10*time.Second, "the viewer's terminal status", func() bool {
		for {
			select {
			case m := <-live:
				last = m
			default:
				if last == nil || !strings.HasSuffix(last.Subject, ".status") {
					return false
				}
				st, err := protocol.ParseStatus(last.Data)
				return err == nil && st.Status == protocol.StatusSucceeded
			}
		}
	})

	// Host tools: the tools user serves an endpoint; the worker discovers
	// and calls it for a run's agent; nobody else may call it, and the
	// tools user may do nothing but serve.
	tools := connect("tools")
	svc, err := micro.AddService(tools.nc, micro.Config{Name: "auth-tools", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	if err := svc.AddEndpoint("deploy", micro.HandlerFunc(func(req micro.Request) {
		_ = req.Respond([]byte("deployed for " + req.Headers().Get(protocol.HeaderToolRunID)))
	}), micro.WithEndpointSubject(names.ToolSubject("deploy")), micro.WithEndpointMetadata(map[string]string{protocol.ToolMetaDescription: "Deploy it"})); err != nil {
		t.Fatal(err)
	}
	o := asClient(0, "submit", "--profile", "tools", "--run-id", "auth-tools", "--watch", "--input",
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","arguments":{}}}`+"\n")
	if !strings.Contains(o, `"description":"Deploy it"`) || !strings.Contains(o, `deployed for auth-tools`) {
		t.Fatalf("the tools run as client:\n%s", o)
	}
	deniedPublish(connect("client"), names.ToolSubject("deploy"), []byte(`{}`))
	deniedPublish(viewer, names.ToolSubject("deploy"), []byte(`{}`))
	for _, subject := range []string{names.IngestSubject("auth-1", protocol.KindEvents), "$JS.API.INFO", worker.InboxPrefix + ".x", "_INBOX.x", names.RunJobSubject()} {
		deniedPublish(tools, subject, nil)
	}
	for _, subject := range []string{names.RunFilter("auth-1"), worker.InboxPrefix + ".>", "_INBOX.>", names.RunJobSubject()} {
		deniedSubscribe(tools, subject)
	}

	// The worker did all it does (jobs, KV, chain, micro service, tool
	// calls) within its permissions.
	if l := workerLog.String(); strings.Contains(strings.ToLower(l), "permissions violation") {
		t.Fatalf("the worker was refused something:\n%s", l)
	}

	// Nobody writes on a run's subjects but the stream, and only a worker
	// feeds the chain.
	wconn := connect("worker", nats.CustomInboxPrefix(worker.InboxPrefix))
	deniedPublish(wconn, names.EventsSubject("auth-1"), nil)
	client := connect("client")
	attacks(t, client, "client", deniedPublish, deniedSubscribe)
	attacks(t, viewer, "viewer", deniedPublish, deniedSubscribe)
	// F0's second route: a direct get of a missing record whose reply is
	// a JetStream API subject (the server's 404 taken as a request)
	// deleted that stream; the client has no direct get now. And the read
	// relay, which the client may ask, answers no reply but its inbox.
	missing := "$JS.API.DIRECT.GET.KV_" + names.RunsBucket() + ".$KV." + names.RunsBucket() + ".nosuchrun"
	if err := client.nc.PublishRequest(missing, "$JS.API.STREAM.DELETE."+names.EventsStream(), nil); err != nil {
		t.Fatal(err)
	}
	waitDenied(client, "Publish", missing)
	for _, subject := range []string{names.ReadRunSubject("nosuchrun"), names.ReadEventsSubject("auth-1"), names.ReadDLQSubject()} {
		if err := client.nc.PublishRequest(subject, "$JS.API.STREAM.DELETE."+names.DLQStream(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.nc.Request(names.ReadDLQSubject(), nil, 5*time.Second); err != nil { // after the hostile ones
		t.Fatalf("the read relay as client: %v", err)
	}
	select {
	case m := <-live:
		t.Fatalf("the viewer got %s %q after the run ended", m.Subject, m.Data)
	case <-time.After(200 * time.Millisecond):
	}

	// Nothing the attacks aimed at changed. These reads have a bound of
	// their own: the one above covers the submits and attacks, which took
	// most of it on a loaded machine (a ./test/... run beside other
	// benchmarks ran it out at the stream read below).
	ctx, cancelChecks := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelChecks()
	wjs := mustJS(t, wconn.nc)
	// A consumer a client may create, made a push consumer onto a run's
	// ingest subject, feeds no chain: nobody may subscribe there, so the
	// server delivers nothing (docs/security.md).
	events, err := wjs.Stream(ctx, names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	tip, err := events.GetLastMsgForSubject(ctx, names.RunFilter("auth-1"))
	if err != nil {
		t.Fatal(err)
	}
	// (Refused as shipped since the read relay: the create gets no answer.)
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if _, err := mustJS(t, client.nc).CreateOrUpdateConsumer(pctx, "KV_"+names.RunsBucket(), jetstream.ConsumerConfig{
		Name: "evilpush", FilterSubject: "$KV." + names.RunsBucket() + ".>", AckPolicy: jetstream.AckNonePolicy,
		DeliverSubject: names.IngestSubject("auth-1", protocol.KindStatus),
	}); err != nil {
		t.Logf("push consumer onto a run's chain: %v", err)
	}
	time.Sleep(time.Second)
	if now, err := events.GetLastMsgForSubject(ctx, names.RunFilter("auth-1")); err != nil || now.Sequence != tip.Sequence {
		t.Fatalf("auth-1's chain after a push consumer onto it: %+v, tip was %d (%v)", now, tip.Sequence, err)
	}
	for _, st := range []string{names.DLQStream(), names.JobsStream(), names.EventsStream(), "KV_" + names.RunsBucket()} {
		info, err := mustStream(t, wjs, st)
		if err != nil {
			t.Fatalf("stream %s after the attacks: %v", st, err)
		}
		if rp := info.Config.RePublish; rp != nil && rp.Destination != names.RunsSubjects() {
			t.Fatalf("stream %s republishes to %s after the attacks", st, rp.Destination)
		}
	}
	if _, err := mustStream(t, wjs, "EVIL"); err == nil {
		t.Fatal("the attackers created stream EVIL")
	}
	if _, err := wjs.Consumer(ctx, names.JobsStream(), consumer.DurableName); err != nil {
		t.Fatalf("the workers' job consumer after the attacks: %v", err)
	}
	// The nonce is nowhere a client reads: not in the run's record.
	spec, err := os.ReadFile(filepath.Join(stateDir, "runs", "auth-1", "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sp struct{ Nonce string }
	if err := json.Unmarshal(spec, &sp); err != nil || sp.Nonce == "" {
		t.Fatalf("no nonce in the run's spec: %v", err)
	}
	raw, err := client.nc.Request(names.ReadRunSubject("auth-1"), nil, 5*time.Second)
	if err != nil || len(raw.Data) == 0 {
		t.Fatalf("auth-1's record through the read relay as client: %v", err)
	}
	if bytes.Contains(raw.Data, []byte(sp.Nonce)) {
		t.Fatal("the run record a client reads holds the nonce")
	}
	client.mu.Lock()
	defer client.mu.Unlock()
	for _, d := range client.denied {
		if strings.Contains(d, names.Prefix()+".read.") {
			t.Fatalf("the client's legitimate read through the relay was refused: %s", d)
		}
	}
}

// passwordVar is the environment variable deploy/*.conf take user's
// password from.
func passwordVar(user string) string {
	return "BATON_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_")) + "_PASSWORD"
}

// conn is a user's connection, with the permission violations the server
// told it of.
type conn struct {
	nc     *nats.Conn
	mu     sync.Mutex
	denied []string
}

func mustJS(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func mustStream(t *testing.T, js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return st.CachedInfo(), nil
}

// attacks tries, as user c, everything issue 13 found a client could do,
// and requires each to be refused by the server.
func attacks(t *testing.T, c *conn, user string, deniedPublish func(*conn, string, []byte), deniedSubscribe func(*conn, string)) {
	t.Helper()
	names := protocol.MustNames("")
	runs, jobs := names.RunsBucket(), names.JobsStream()
	for _, a := range []struct {
		what, subject, body string
	}{
		{"add a stream republishing records onto a run's chain", "$JS.API.STREAM.CREATE.EVIL",
			`{"name":"EVIL","subjects":["evil.>"],"republish":{"src":">","dest":"baton.ingest.auth-1.status"}}`},
		{"add a republish to the records' stream", "$JS.API.STREAM.UPDATE.KV_" + runs,
			`{"name":"KV_` + runs + `","subjects":["$KV.` + runs + `.>"],"republish":{"src":"$KV.` + runs + `.>","dest":"baton.ingest.auth-1.status"}}`},
		{"change the events stream", "$JS.API.STREAM.UPDATE." + names.EventsStream(), `{"name":"` + names.EventsStream() + `"}`},
		{"delete the workers' job consumer", "$JS.API.CONSUMER.DELETE." + jobs + "." + consumer.DurableName, ""},
		{"create a job consumer", "$JS.API.CONSUMER.CREATE." + jobs + ".thief", `{"stream_name":"` + jobs + `","config":{"name":"thief"}}`},
		{"create a filtered job consumer", "$JS.API.CONSUMER.CREATE." + jobs + ".thief." + names.RunJobSubject(), `{"stream_name":"` + jobs + `","config":{"name":"thief","filter_subject":"` + names.RunJobSubject() + `"}}`},
		{"create a durable job consumer", "$JS.API.CONSUMER.DURABLE.CREATE." + jobs + ".thief", `{"stream_name":"` + jobs + `","config":{"durable_name":"thief"}}`},
		{"create an ephemeral job consumer", "$JS.API.CONSUMER.CREATE." + jobs, `{"stream_name":"` + jobs + `","config":{}}`},
		{"pull the workers' jobs", "$JS.API.CONSUMER.MSG.NEXT." + jobs + "." + consumer.DurableName, `{"batch":1}`},
		{"delete the DLQ", "$JS.API.STREAM.DELETE." + names.DLQStream(), ""},
		{"purge the DLQ", "$JS.API.STREAM.PURGE." + names.DLQStream(), ""},
		{"delete a DLQ entry", "$JS.API.STREAM.MSG.DELETE." + names.DLQStream(), `{"seq":1}`},
		{"read a pending job", "$JS.API.STREAM.MSG.GET." + jobs, `{"seq":1}`},
		{"read a lease", "$JS.API.DIRECT.GET.KV_" + names.LeasesBucket() + ".$KV." + names.LeasesBucket() + ".auth-1", ""},
		{"read the node heartbeats", "$JS.API.CONSUMER.CREATE.KV_" + names.NodesBucket() + ".x.$KV." + names.NodesBucket() + ".>", `{}`},
		{"list streams", "$JS.API.STREAM.LIST", ""},
		{"read the account", "$JS.API.INFO", ""},
		{"read the events unfiltered", "$JS.API.CONSUMER.CREATE." + names.EventsStream() + ".x", `{}`},
		// F8: durables filling each stream's consumer limit for good.
		{"create a durable on the events stream", "$JS.API.CONSUMER.CREATE." + names.EventsStream() + ".evil.baton.runs.auth-1.>",
			`{"stream_name":"` + names.EventsStream() + `","config":{"durable_name":"evil","filter_subject":"baton.runs.auth-1.>"}}`},
		{"create a durable on the records", "$JS.API.CONSUMER.CREATE.KV_" + runs + ".evil.$KV." + runs + ".>",
			`{"stream_name":"KV_` + runs + `","config":{"durable_name":"evil","filter_subject":"$KV.` + runs + `.>"}}`},
		{"create a durable on the DLQ", "$JS.API.CONSUMER.CREATE." + names.DLQStream() + ".evil.baton.dlq.>",
			`{"stream_name":"` + names.DLQStream() + `","config":{"durable_name":"evil","filter_subject":"baton.dlq.>"}}`},
		{"create a durable on the outputs", "$JS.API.CONSUMER.CREATE.OBJ_" + names.OutputsBucket() + ".evil.$O." + names.OutputsBucket() + ".>",
			`{"stream_name":"OBJ_` + names.OutputsBucket() + `","config":{"durable_name":"evil","filter_subject":"$O.` + names.OutputsBucket() + `.>"}}`},
		{"create a direct consumer on the events stream (F11)", "$JS.API.CONSUMER.CREATE." + names.EventsStream() + ".evil2.baton.runs.auth-1.>",
			`{"stream_name":"` + names.EventsStream() + `","config":{"name":"evil2","direct":true,"filter_subject":"baton.runs.auth-1.>","deliver_subject":"_INBOX.evil"}}`},
		{"read a chain message by sequence", "$JS.API.STREAM.MSG.GET." + names.EventsStream(), `{"seq":1}`},
		{"direct get a record", "$JS.API.DIRECT.GET.KV_" + runs + ".$KV." + runs + ".auth-1", ""},
		{"direct get an output's info", "$JS.API.DIRECT.GET.OBJ_" + names.OutputsBucket() + ".$O." + names.OutputsBucket() + ".M.YXV0aC1vdXQvZGlmZi5wYXRjaA==", ""},
		{"direct get the events", "$JS.API.DIRECT.GET." + names.EventsStream(), `{"seq":1,"next_by_subj":"baton.runs.>","batch":10}`},
		{"write a run record", "$KV." + runs + ".auth-1", `{}`},
		{"write a record whose key is a path", "$KV." + runs + ".auth-1/workspace", `{}`},
		{"purge the run records", "$JS.API.STREAM.PURGE.KV_" + runs, ""},
		{"delete a run record", "$JS.API.STREAM.MSG.DELETE.KV_" + runs, `{"seq":1}`},
		{"forge a status on the ingest subject", names.IngestSubject("auth-1", protocol.KindStatus), `{"status":"succeeded"}`},
		{"forge an event on the ingest subject", names.IngestSubject("auth-1", protocol.KindEvents), `{}`},
		{"forge a status on the run's subject", names.StatusSubject("auth-1"), `{"status":"succeeded"}`},
		{"forge an attach job", names.AttachJobSubject("auth"), `{"runId":"auth-1","reason":"recover"}`},
		{"forge a cancel notice", names.CancelledSubject("auth-1"), ""},
		{"write a lease", "$KV." + names.LeasesBucket() + ".auth-1", `{}`},
		{"write a heartbeat", "$KV." + names.NodesBucket() + ".ghost.w", `{}`},
		{"hide a run from the reaper", "$KV." + names.NodeRunsBucket() + ".auth.auth-long", ""},
		{"overwrite an output's info", "$O." + names.OutputsBucket() + ".M.YXV0aC1vdXQvZGlmZi5wYXRjaA==", `{}`},
		{"add an output chunk", "$O." + names.OutputsBucket() + ".C.evil", "x"},
		{"delete an output", "$JS.API.STREAM.MSG.DELETE.OBJ_" + names.OutputsBucket(), `{"seq":1}`},
		{"purge the outputs", "$JS.API.STREAM.PURGE.OBJ_" + names.OutputsBucket(), ""},
		{"delete the outputs bucket", "$JS.API.STREAM.DELETE.OBJ_" + names.OutputsBucket(), ""},
		{"change the outputs bucket's TTL", "$JS.API.STREAM.UPDATE.OBJ_" + names.OutputsBucket(), `{"name":"OBJ_` + names.OutputsBucket() + `"}`},
		{"delete a workspace archive", "$JS.API.STREAM.MSG.DELETE." + names.WorkspacesStream(), `{"seq":1}`},
		{"purge the workspace archives", "$JS.API.STREAM.PURGE." + names.WorkspacesStream(), ""},
		{"delete the workspaces stream", "$JS.API.STREAM.DELETE." + names.WorkspacesStream(), ""},
		{"change the workspaces stream's max age", "$JS.API.STREAM.UPDATE." + names.WorkspacesStream(), `{"name":"` + names.WorkspacesStream() + `"}`},
		// Sessions: only workers write their records and checkpoints, and
		// a client reads the records through the relay alone.
		{"write a session record", "$KV." + names.SessionsBucket() + ".auth-s", `{}`},
		{"purge the session records", "$JS.API.STREAM.PURGE.KV_" + names.SessionsBucket(), ""},
		{"direct get a session record", "$JS.API.DIRECT.GET.KV_" + names.SessionsBucket() + ".$KV." + names.SessionsBucket() + ".auth-s", ""},
		{"add a checkpoint chunk", "$O." + names.CheckpointsBucket() + ".C.evil", "x"},
		{"overwrite a checkpoint's info", "$O." + names.CheckpointsBucket() + ".M.YXV0aC1zL2F1dGgtMQ==", `{}`},
		{"read a checkpoint", "$JS.API.DIRECT.GET.OBJ_" + names.CheckpointsBucket(), `{"seq":1}`},
		{"delete a checkpoint", "$JS.API.STREAM.MSG.DELETE.OBJ_" + names.CheckpointsBucket(), `{"seq":1}`},
		{"delete the checkpoints bucket", "$JS.API.STREAM.DELETE.OBJ_" + names.CheckpointsBucket(), ""},
		{"forge a session's moved job as a worker would", names.RetryJobSubject(), `{"runId":"auth-r","profile":"demo","session":"s"}`},
	} {
		t.Logf("%s tries to %s", user, a.what)
		deniedPublish(c, a.subject, []byte(a.body))
	}
	for _, subject := range []string{
		worker.InboxPrefix + ".>",     // the worker's replies: fetched jobs, leases
		names.Prefix() + ".jobs.>",    // jobs as they are submitted
		names.Prefix() + ".control.>", // cancel requests and notices
		names.Prefix() + ".ingest.>",  // chains before the stream fences them
		"$KV." + runs + ".>",          // records as they are written
		"$KV." + names.SessionsBucket() + ".>",
		"$O." + names.CheckpointsBucket() + ".>",
	} {
		t.Logf("%s tries to subscribe to %s", user, subject)
		deniedSubscribe(c, subject)
	}
}

// TestTenantsAreIsolated loads deploy/nats-tenants.conf: each tenant's users
// have exactly the permissions of deploy/nats-auth.conf, its account has its
// JetStream limits, and one tenant's baton is invisible to another's
// client.
func TestTenantsAreIsolated(t *testing.T) {
	for _, user := range []string{"WORKER", "WORKER_SVC", "CLIENT", "VIEWER", "TOOLS"} {
		t.Setenv("BATON_"+user+"_PASSWORD", "p")
		t.Setenv("TENANT_A_"+user+"_PASSWORD", "p")
		t.Setenv("TENANT_B_"+user+"_PASSWORD", "p")
	}
	dir := t.TempDir()
	load := func(file string) *server.Options { return testenv.ShippedConfig(t, "../..", dir, file, nil) }
	perms := func(o *server.Options) map[string]*server.Permissions {
		m := map[string]*server.Permissions{}
		for _, u := range o.Users {
			m[u.Username] = u.Permissions
		}
		return m
	}
	single, tenants := perms(load("nats-auth.conf")), load("nats-tenants.conf")
	for user, p := range perms(tenants) {
		role := user[strings.IndexByte(user, '-')+1:]
		if !reflect.DeepEqual(p, single[role]) {
			t.Errorf("%s's permissions differ from %s's in nats-auth.conf:\n%+v\n%+v", user, role, p, single[role])
		}
	}

	tenants.NoLog, tenants.NoSigs = true, true
	s, err := server.NewServer(tenants)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	connect := func(user string, opts ...nats.Option) jetstream.JetStream {
		nc, err := nats.Connect(s.ClientURL(), append(opts, nats.UserInfo(user, "p"))...)
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return mustJS(t, nc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := protocol.MustNames("")
	aw := connect("a-worker", nats.CustomInboxPrefix(worker.InboxPrefix))
	if _, err := provision.Ensure(ctx, aw, names, provision.Options{}); err != nil {
		t.Fatalf("provision as tenant A's worker: %v", err)
	}
	info, err := aw.AccountInfo(ctx)
	if err != nil || info.Limits.MaxStore != 20_000_000_000 || info.Streams == 0 {
		t.Fatalf("tenant A's account: %+v, %v; want its 20G file limit and baton's streams", info, err)
	}
	a, err := client.New(connect("a-client"), names)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Submit(ctx, protocol.Job{RunID: "a-1", Profile: "demo"}); err != nil {
		t.Fatalf("submit as tenant A's client: %v", err)
	}
	b, err := client.New(connect("b-client"), names)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Submit(ctx, protocol.Job{RunID: "b-1", Profile: "demo"}); err == nil {
		t.Fatal("tenant B's client submitted into a stream it does not have")
	}
	if _, err := b.Run(ctx, "a-1"); err == nil || errors.Is(err, client.ErrNotFound) {
		t.Fatalf("tenant B's client reading runs: %v; want no bucket at all", err)
	}
}
