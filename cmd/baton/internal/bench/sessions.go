package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/checkpoint"
	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/sandbox"
)

const (
	sessionsTarget     = "checkpoint and restore of a 200 MiB, 4,000-file tree each ≤ 2 s; after a one-file change ≤ 200 ms"
	sessionsWakeTarget = "a paused session: send → the new run's first line ≤ 1 s; nothing of it running meanwhile"
)

// sessions: a session's checkpoint of a tree of sz.sessionBytes in 4,000
// files (a base), its restore into an empty workspace and home, and a
// checkpoint after a one-file change (a delta: its time and the bytes it
// stores), on the suite's server; then a paused session of the chat
// profile woken by a send, timed to the first line of the run it starts.
func (e *env) sessions(ctx context.Context, sz sizes) []Result {
	fail := func(err error) []Result { return failed("sessions", sessionsTarget, err) }
	root, err := os.MkdirTemp(e.dir, "sessions-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(root)
	tree := checkpoint.Tree{Workspace: filepath.Join(root, "ws"), Home: filepath.Join(root, "home"), MaxBytes: 2 * sz.sessionBytes}
	const files = 4000
	per := sz.sessionBytes / files
	line := strings.Repeat("a line of a source file in the agent's workspace; ", 2) + "\n"
	body := []byte(strings.Repeat(line, int(per)/len(line)+1)[:per])
	for i := range files {
		p := filepath.Join(tree.Workspace, fmt.Sprintf("pkg%02d/file%04d.go", i%40, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return fail(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(tree.Home, ".claude"), 0o755); err != nil {
		return fail(err)
	}
	obs, err := e.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "BENCH_CHECKPOINTS", Storage: jetstream.FileStorage, Compression: true})
	if err != nil {
		return fail(err)
	}
	defer func() { _ = e.js.DeleteObjectStore(context.WithoutCancel(ctx), "BENCH_CHECKPOINTS") }()

	start := time.Now()
	base, index, err := checkpoint.Write(ctx, obs, tree, checkpoint.Options{Session: "bench", Run: "r1", Object: checkpoint.Name("bench", "r1")})
	if err != nil {
		return fail(err)
	}
	write := time.Since(start)
	restore, err := e.restoreOnce(ctx, obs, root, base.Object)
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(tree.Workspace, "pkg07", "file0007.go"), []byte("package changed\n"), 0o644); err != nil {
		return fail(err)
	}
	start = time.Now()
	delta, _, err := checkpoint.Write(ctx, obs, tree, checkpoint.Options{Session: "bench", Run: "r2", Object: checkpoint.Name("bench", "r2"), Parent: base, Index: index})
	if err != nil {
		return fail(err)
	}
	incr := time.Since(start)
	info, err := obs.GetInfo(ctx, delta.Object)
	if err != nil {
		return fail(err)
	}
	// The anchors, on the same server and disk: the tree's bytes put as
	// one object, and read back and written as the same files.
	put, get, err := e.storeAnchor(ctx, obs, root, body, files)
	if err != nil {
		return fail(err)
	}
	results := []Result{{
		Row: "sessions", Target: sessionsTarget,
		Measured: fmt.Sprintf("%d MiB, %d files: checkpoint %s (%.2f × an object put of the bytes, %s), restore %s (%.2f × getting them and writing the files, %s); one file changed: checkpoint %s storing %d bytes (%d in the object)",
			sz.sessionBytes>>20, files, ms(write), float64(write)/float64(put), ms(put), ms(restore), float64(restore)/float64(get), ms(get), ms(incr), delta.Bytes, info.Size),
		Pass: verdict(write <= 2*time.Second && restore <= 2*time.Second && incr <= 200*time.Millisecond),
	}}
	return append(results, e.sessionWake(ctx))
}

// storeAnchor puts files copies of body as one object and times it, then
// times getting it back and writing it as files files under root: what a
// checkpoint and a restore of such a tree cannot beat.
func (e *env) storeAnchor(ctx context.Context, obs jetstream.ObjectStore, root string, body []byte, files int) (put, get time.Duration, err error) {
	parts := make([]io.Reader, files)
	for i := range parts {
		parts[i] = bytes.NewReader(body)
	}
	start := time.Now()
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: "anchor"}, io.MultiReader(parts...)); err != nil {
		return 0, 0, err
	}
	put = time.Since(start)
	start = time.Now()
	r, err := obs.Get(ctx, "anchor")
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	buf := make([]byte, len(body))
	for i := range files {
		if _, err := io.ReadFull(r, buf); err != nil {
			return 0, 0, err
		}
		p := filepath.Join(root, "anchor", fmt.Sprintf("pkg%02d/file%04d.go", i%40, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, 0, err
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			return 0, 0, err
		}
	}
	return put, time.Since(start), nil
}

// restoreOnce restores object into fresh directories under root and
// returns how long it took.
func (e *env) restoreOnce(ctx context.Context, obs jetstream.ObjectStore, root, object string) (time.Duration, error) {
	var roots [2]*os.Root
	for i, name := range []string{"rws", "rhome"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			return 0, err
		}
		r, err := os.OpenRoot(filepath.Join(root, name))
		if err != nil {
			return 0, err
		}
		defer r.Close()
		roots[i] = r
	}
	start := time.Now()
	_, err := checkpoint.Restore(ctx, obs, object, checkpoint.Dest{Workspace: roots[0], Home: roots[1]})
	return time.Since(start), err
}

// sessionWake runs a chat session's first run until it pauses, checks
// that nothing of it runs, then sends the session a message and times the
// send to the first line of the run it starts.
func (e *env) sessionWake(ctx context.Context) Result {
	fail := func(err error) Result { return failed("sessions", sessionsWakeTarget, err)[0] }
	w, err := e.startWorker(ctx, "sessions", 4)
	if err != nil {
		return fail(err)
	}
	defer w.stop(30 * time.Second)
	first := fmt.Sprintf("bench-session-%d", time.Now().UnixNano())
	term := newTerminal()
	lines := make(chan string, 16)
	sub, err := e.subscribe(e.names.Prefix()+".runs.>", func(m runMsg) {
		term.see(m)
		if m.kind == protocol.KindEvents && m.runID != first {
			select {
			case lines <- m.runID:
			default:
			}
		}
	})
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	job := protocol.Job{RunID: first, Profile: "chat", Input: string(client.StreamJSONUserMessage("hello"))}
	if err := e.client.Submit(ctx, job, client.WithSession(first)); err != nil {
		return fail(err)
	}
	ended, err := e.waitRuns(ctx, term, []string{first}, time.Minute)
	if err != nil {
		return fail(err)
	}
	if st := ended[first]; st.Status != protocol.StatusPaused {
		return fail(fmt.Errorf("the chat run ended %s (%s), not paused", st.Status, st.Reason))
	}
	if alive, err := sandbox.Alive(e.runDir(first)); err != nil || alive {
		return fail(fmt.Errorf("the paused run's runner is alive (%v)", err))
	}
	sent := time.Now()
	rep, err := e.client.SendSession(ctx, first, client.StreamJSONUserMessage("again"))
	if err != nil || !rep.Started {
		return fail(fmt.Errorf("send: %+v, %v", rep, err))
	}
	select {
	case <-lines:
	case <-time.After(30 * time.Second):
		return fail(fmt.Errorf("the woken run %s printed nothing within 30 s", rep.RunID))
	}
	wake := time.Since(sent)
	return Result{Row: "sessions", Target: sessionsWakeTarget,
		Measured: fmt.Sprintf("paused after 1 s of waiting, no runner left; send → first line of the next run %s", ms(wake)),
		Pass:     verdict(wake <= time.Second)}
}
