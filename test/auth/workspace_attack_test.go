package auth

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/test/internal/e2e"
	"github.com/batonhq/baton/worker"
)

// TestClientWorkspaceAttacks runs deploy/nats-auth.conf as shipped and tries,
// as `client`, what the 2026-12-02 review found it could do to
// BATON_WORKSPACES, each on the object store's subjects it had (F2, F3) and
// on the stream's it has now: a rollup on another archive's record and on a
// chunk (F2) changes nothing and the victim's seeded run still runs; no
// subject it may publish reads the victim's archive back (F3); and uploads
// past workspacesMaxBytes are refused with ErrWorkspacesFull while a job is
// still accepted (F12).
func TestClientWorkspaceAttacks(t *testing.T) {
	bin := testenv.BatonBinary(t)
	pw := map[string]string{"worker": "w-secret", "worker-svc": "s-secret", "client": "c-secret", "viewer": "v-secret", "tools": "t-secret"}
	for user, p := range pw {
		t.Setenv(passwordVar(user), p)
	}
	opts := testenv.ShippedConfig(t, "../..", t.TempDir(), "nats-auth.conf", nil)
	opts.JetStreamMaxStore = 64 << 20 // the server's whole store: 20 MiB reserved below
	s := testenv.RunShipped(t, opts)
	url := func(user string) string {
		return fmt.Sprintf("nats://%s:%s@%s", user, pw[user], strings.TrimPrefix(s.ClientURL(), "nats://"))
	}
	names := protocol.MustNames("")
	const secret = "VICTIM-SECRET-7f3a"
	cfg := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(cfg, []byte(`jobsMaxBytes: 8MiB
dlqMaxBytes: 8MiB
maxWorkspaceBytes: 1MiB
workspacesMaxBytes: 4MiB
checkpointsMaxBytes: 4MiB
profiles:
  ws:
    command: [/bin/sh, -c, 'test "$(cat secret.env)" = `+secret+` && echo "{\"seeded\":true}"']
`), 0o644); err != nil {
		t.Fatal(err)
	}
	workerLog := e2e.StartWorker(t, bin, url("worker"), testenv.StateDir(t), "ws-attack", "--config", cfg, "--service-nats", url("worker-svc"))

	var violations struct {
		sync.Mutex
		seen []string
	}
	connect := func(user string, opts ...nats.Option) *nats.Conn {
		nc, err := nats.Connect(url(user), append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				violations.Lock()
				violations.seen = append(violations.seen, err.Error())
				violations.Unlock()
			}
		}))...)
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The victim uploads a plain tar, so its secret is in the archive's
	// bytes as they are stored.
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	if err := tw.WriteHeader(&tar.Header{Name: "secret.env", Mode: 0o644, Size: int64(len(secret) + 1), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(secret + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	victim, err := client.New(mustJS(t, connect("client")), names)
	if err != nil {
		t.Fatal(err)
	}
	object, err := victim.PutWorkspace(ctx, bytes.NewReader(archive.Bytes()))
	if err != nil {
		t.Fatalf("the victim's upload: %v", err)
	}
	digest := strings.TrimSuffix(strings.TrimPrefix(object, "sha256-"), ".tar")
	wjs := mustJS(t, connect("worker", nats.CustomInboxPrefix(worker.InboxPrefix)))
	streamState := func() jetstream.StreamState {
		t.Helper()
		st, err := wjs.Stream(ctx, names.WorkspacesStream())
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State
	}
	before := streamState()

	attacker := connect("client")
	ajs := mustJS(t, attacker)
	objects := "$O." + strings.ToUpper(names.Prefix()) + "_WORKSPACES"
	stream := names.WorkspacesStream()
	other := make([]byte, 32)
	_, _ = rand.Read(other)

	// F2: rollups on the object store's subjects (no longer the client's)
	// and on the stream's (refused by the stream), and plain replacements.
	for _, a := range []struct {
		what, subject, rollup, body string
	}{
		{"mark the victim's object deleted", objects + ".M." + base64.URLEncoding.EncodeToString([]byte(object)), "sub", `{"name":"` + object + `","deleted":true}`},
		{"purge the object store", objects + ".C.evil", "all", "x"},
		{"roll up the victim's size record", names.WorkspaceSizeSubject(digest), "sub", "1"},
		{"roll up the stream from a chunk of the victim's", names.WorkspaceChunkSubject(digest, 0), "all", "x"},
		{"roll up the stream from a new chunk", names.WorkspaceChunkSubject(hex.EncodeToString(other), 0), "all", "x"},
		{"replace the victim's size record", names.WorkspaceSizeSubject(digest), "", "1"},
		{"replace the victim's chunk", names.WorkspaceChunkSubject(digest, 0), "", "garbage"},
	} {
		m := nats.NewMsg(a.subject)
		m.Data = []byte(a.body)
		if a.rollup != "" {
			m.Header.Set("Nats-Rollup", a.rollup)
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := ajs.PublishMsg(pctx, m)
		pcancel()
		if err == nil {
			t.Errorf("client could %s (%s): the stream stored it", a.what, a.subject)
		} else {
			t.Logf("client tries to %s: %v", a.what, err)
		}
	}
	if after := streamState(); after.Msgs != before.Msgs || after.Bytes != before.Bytes || after.LastSeq != before.LastSeq {
		t.Errorf("the workspaces stream after the rollups: %d messages, %d bytes, last %d; was %d, %d, %d",
			after.Msgs, after.Bytes, after.LastSeq, before.Msgs, before.Bytes, before.LastSeq)
	}

	// F3: no read of any subject the client may or may not publish gives
	// the victim's archive back; the API's are refused outright.
	inbox := attacker.NewRespInbox()
	replies, err := attacker.SubscribeSync(inbox + ".>")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	request := func(subject string, hdr nats.Header, body string) string {
		n++
		reply := fmt.Sprintf("%s.%d", inbox, n)
		if err := attacker.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Header: hdr, Data: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		return reply
	}
	for _, a := range []struct{ what, subject, body string }{
		{"read the newest object's info", "$JS.API.DIRECT.GET.OBJ_" + stream + "." + objects + ".M.>", ""},
		{"read the newest object's last chunk", "$JS.API.DIRECT.GET.OBJ_" + stream + "." + objects + ".C.>", ""},
		{"read a chunk by a direct get", "$JS.API.DIRECT.GET." + stream + "." + names.WorkspaceChunkSubject(digest, 0), ""},
		{"read the newest chunk by a direct get", "$JS.API.DIRECT.GET." + stream + "." + names.WorkspacesSubjects(), ""},
		{"read a chunk by a direct get request", "$JS.API.DIRECT.GET." + stream, `{"last_by_subj":"` + names.WorkspaceChunkSubject(digest, 0) + `"}`},
		{"read a chunk by a message get", "$JS.API.STREAM.MSG.GET." + stream, `{"last_by_subj":"` + names.WorkspaceChunkSubject(digest, 0) + `"}`},
		{"list the archives' subjects", "$JS.API.STREAM.INFO." + stream, `{"subjects_filter":">"}`},
		{"read the stream by a consumer", "$JS.API.CONSUMER.CREATE." + stream, `{"stream_name":"` + stream + `","config":{"deliver_subject":"` + inbox + `.push","ack_policy":"none"}}`},
		{"read the stream by a filtered consumer", "$JS.API.CONSUMER.CREATE." + stream + ".x." + names.WorkspacesSubjects(), `{"stream_name":"` + stream + `","config":{"name":"x","filter_subject":"` + names.WorkspacesSubjects() + `"}}`},
		{"read the object store by a consumer", "$JS.API.CONSUMER.CREATE.OBJ_" + stream, `{"stream_name":"OBJ_` + stream + `","config":{"deliver_subject":"` + inbox + `.push","ack_policy":"none"}}`},
	} {
		t.Logf("client tries to %s", a.what)
		request(a.subject, nil, a.body)
		testenv.WaitFor(t, 5*time.Second, "a permissions violation for "+a.subject, func() bool {
			violations.Lock()
			defer violations.Unlock()
			for _, d := range violations.seen {
				if strings.Contains(d, "Publish") && strings.Contains(d, a.subject+`"`) {
					return true
				}
			}
			return false
		})
	}
	// What the client may publish answers with a publish's acknowledgement
	// at most: the probe of an upload, on the victim's subjects and with
	// wildcards in the header the stream reads.
	probe := nats.Header{"Nats-Expected-Last-Subject-Sequence": {"0"}}
	wild := nats.Header{"Nats-Expected-Last-Subject-Sequence": {"0"}, "Nats-Expected-Last-Subject-Sequence-Subject": {names.WorkspacesSubjects()}}
	// Answers that must come (true), and that may (the server's way with
	// a wildcard in a published subject is its own).
	answered := map[string]bool{
		request(names.WorkspaceChunkSubject(digest, 0), probe, ""):                                            true,
		request(names.WorkspaceSizeSubject(digest), probe, ""):                                                true,
		request(names.WorkspaceChunkSubject(digest, 1), wild, ""):                                             true,
		request(names.WorkspaceChunkSubject(digest, 0)+".*", nil, ""):                                         false,
		request(names.Prefix()+".workspaces.*.*", nil, ""):                                                    false,
		request(names.Prefix()+".workspaces.>", nil, ""):                                                      false,
		request("$JS.API.DIRECT.GET."+stream+".>", nil, ""):                                                   false,
		request("$JS.API.DIRECT.GET.*."+names.WorkspacesSubjects(), nil, ""):                                  false,
		request("$JS.API.DIRECT.GET.>", nil, `{"last_by_subj":"`+names.WorkspaceChunkSubject(digest, 0)+`"}`): false,
	}
	must := 0
	for _, a := range answered {
		if a {
			must++
		}
	}
	got := map[string]bool{}
	for {
		wait := 5 * time.Second
		if len(got) >= must { // then only what may still come
			wait = 500 * time.Millisecond
		}
		m, err := replies.NextMsg(wait)
		if err != nil {
			break
		}
		if bytes.Contains(m.Data, []byte(secret)) || bytes.Contains(m.Data, []byte(base64.StdEncoding.EncodeToString(archive.Bytes()[:96]))) {
			t.Fatalf("the client read the victim's archive on %s: %q", m.Subject, m.Data)
		}
		if _, ok := answered[m.Subject]; !ok {
			t.Errorf("an answer on %s: %.200q", m.Subject, m.Data)
		}
		t.Logf("answer on %s: %.200q", m.Subject, m.Data)
		got[m.Subject] = true
	}
	for reply, must := range answered {
		if must && !got[reply] {
			t.Errorf("no answer on %s within 5s", reply)
		}
	}

	// F12: uploads fill workspacesMaxBytes and no more, with a clear
	// error; a job still goes in (its stream's room is its own).
	attackerClient, err := client.New(ajs, names)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for i := range 12 {
		junk := make([]byte, 1<<20)
		_, _ = rand.Read(junk)
		_, err := attackerClient.PutWorkspace(ctx, bytes.NewReader(junk))
		if err != nil {
			if !errors.Is(err, client.ErrWorkspacesFull) || !strings.Contains(err.Error(), "workspacesMaxBytes") {
				t.Fatalf("upload %d refused with %v; want ErrWorkspacesFull", i, err)
			}
			t.Logf("upload %d refused: %v", i, err)
			break
		}
		stored++
	}
	if stored > 4 {
		t.Fatalf("the client stored %d MiB of archives past workspacesMaxBytes (4 MiB)", stored)
	}
	if st := streamState(); st.Bytes > 4<<20 {
		t.Fatalf("the workspaces stream holds %d bytes, past its 4 MiB", st.Bytes)
	}

	// The victim's seeded run still runs, on its archive as uploaded.
	if err := victim.Submit(ctx, protocol.Job{RunID: "ws-victim", Profile: "ws", Workspace: &protocol.WorkspaceRef{Object: object}}); err != nil {
		t.Fatalf("the victim's job, once the workspaces stream is full: %v", err)
	}
	var seeded bool
	st, err := victim.Watch(ctx, "ws-victim", func(ev client.Event) error {
		seeded = seeded || strings.Contains(string(ev.Data), `"seeded":true`)
		return nil
	})
	if err != nil || st.Status != protocol.StatusSucceeded || !seeded {
		t.Fatalf("the victim's seeded run: %+v, %v; the agent saw its archive: %v", st, err, seeded)
	}
	if l := workerLog.String(); strings.Contains(strings.ToLower(l), "permissions violation") {
		t.Fatalf("the worker was refused something:\n%s", l)
	}
}
