package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/unpack"
	"github.com/batonhq/baton/internal/wsarchive"
	"github.com/batonhq/baton/protocol"
)

// TestCLISubmitWorkspace: submit --workspace DIR tars the directory
// (links kept, a FIFO skipped), uploads it named by its SHA-256 once, and
// names it in the job; --workspace FILE uploads an archive as it is.
func TestCLISubmitWorkspace(t *testing.T) {
	e := newCLIEnv(t)
	dir := t.TempDir()
	for p, body := range map[string]string{"README.md": "hi\n", "src/main.go": "package main\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("src/main.go", filepath.Join(dir, "main")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	submitted := func(args ...string) protocol.Job {
		t.Helper()
		if _, errOut, err := e.run("", append([]string{"submit", "--profile", "demo"}, args...)...); err != nil {
			t.Fatalf("submit %v: %v %s", args, err, errOut)
		}
		msg, err := e.res.Jobs.GetLastMsgForSubject(t.Context(), protocol.MustNames("").RunJobSubject())
		if err != nil {
			t.Fatal(err)
		}
		job, err := protocol.DecodeJob(msg.Data, "", protocol.Limits{})
		if err != nil || job.Workspace == nil {
			t.Fatalf("job %+v, %v", job, err)
		}
		return job
	}
	first := submitted("--workspace", dir).Workspace.Object
	if !regexp.MustCompile(`^sha256-[0-9a-f]{64}\.tar\.gz$`).MatchString(first) {
		t.Fatalf("object named %q", first)
	}
	names := protocol.MustNames("")
	digest, _ := protocol.WorkspaceDigest(first)
	sizeRecord := func() *jetstream.RawStreamMsg {
		t.Helper()
		msg, err := e.res.Workspaces.GetLastMsgForSubject(t.Context(), names.WorkspaceSizeSubject(digest))
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	stored := sizeRecord()
	if again := submitted("--workspace", dir).Workspace.Object; again != first {
		t.Fatalf("the same directory uploaded as %q, then %q", first, again)
	}
	// Not stored again: the archive is the first put's.
	if again := sizeRecord(); again.Sequence != stored.Sequence {
		t.Fatalf("the same archive was put again (size record at %d, then %d)", stored.Sequence, again.Sequence)
	}
	size, err := wsarchive.Size(t.Context(), e.res.Workspaces, names, digest)
	if err != nil {
		t.Fatal(err)
	}
	r := wsarchive.Open(t.Context(), e.res.Workspaces, names, digest, size)
	defer r.Close()
	archive, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := unpack.Extract(context.Background(), bytes.NewReader(archive), root, unpack.Options{}); err != nil {
		t.Fatalf("the uploaded archive does not extract: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "src/main.go")); err != nil || string(b) != "package main\n" {
		t.Errorf("src/main.go: %q %v", b, err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "main")); err != nil || target != "src/main.go" {
		t.Errorf("main: %q %v, want the link", target, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "pipe")); !os.IsNotExist(err) {
		t.Errorf("the FIFO was archived: %v", err)
	}

	// An archive file: uploaded as it is; the same bytes as the
	// directory's are the same object.
	var tgz bytes.Buffer
	if err := client.TarDir(&tgz, dir); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "repo.tar.gz")
	if err := os.WriteFile(file, tgz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := submitted("--workspace", file).Workspace.Object; got != first {
		t.Errorf("the directory's archive as a file uploaded as %q, not %q", got, first)
	}
	plain := filepath.Join(t.TempDir(), "repo.tar")
	if err := os.WriteFile(plain, []byte("not gzip, a tar as far as the name goes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := submitted("--workspace", plain).Workspace.Object; !regexp.MustCompile(`^sha256-[0-9a-f]{64}\.tar$`).MatchString(got) {
		t.Errorf("a plain archive named %q", got)
	}
	if _, _, err := e.run("", "submit", "--profile", "demo", "--workspace", filepath.Join(dir, "nope")); err == nil {
		t.Error("--workspace of a missing path submitted")
	}
}
