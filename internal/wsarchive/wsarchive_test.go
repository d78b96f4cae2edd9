package wsarchive_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/internal/wsarchive"
	"github.com/batonhq/baton/protocol"
)

// TestOpenReadsWhatWasUploaded: an archive of several chunks, the last
// one short, reads back byte for byte, in order, even when its chunks
// were stored out of order (an upload resumed); uploading it again, or
// resuming an upload cut short, stores only what is missing; a missing chunk or one of
// the wrong length fails the read with ErrBadChunk, and a missing size
// record is ErrNotStored.
func TestOpenReadsWhatWasUploaded(t *testing.T) {
	s := testenv.RunServer(t)
	_, js := testenv.Connect(t, s)
	names := protocol.MustNames("")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := provision.Ensure(ctx, js, names, provision.Options{})
	if err != nil {
		t.Fatal(err)
	}
	read := func(digest string) ([]byte, error) {
		size, err := wsarchive.Size(ctx, res.Workspaces, names, digest)
		if err != nil {
			return nil, err
		}
		r := wsarchive.Open(ctx, res.Workspaces, names, digest, size)
		defer r.Close()
		return io.ReadAll(r)
	}
	data := make([]byte, 40*protocol.WorkspaceChunkBytes+1234)
	_, _ = rand.Read(data)
	cl, err := client.New(js, names)
	if err != nil {
		t.Fatal(err)
	}
	name, err := cl.PutWorkspace(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := protocol.WorkspaceDigest(name)
	if got, err := read(digest); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes of %d, equal %v: %v", len(got), len(data), bytes.Equal(got, data), err)
	}
	// 41 chunks and the size record; the existence probe stored nothing,
	// and neither does an upload of what is stored.
	state := func() (uint64, uint64) {
		t.Helper()
		info, err := res.Workspaces.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs, info.State.LastSeq
	}
	if msgs, _ := state(); msgs != 42 {
		t.Fatalf("the upload stored %d messages, want 42", msgs)
	}
	_, last := state()
	if again, err := cl.PutWorkspace(ctx, bytes.NewReader(data)); err != nil || again != name {
		t.Fatalf("again: %q, %v", again, err)
	}
	if _, now := state(); now != last {
		t.Fatalf("uploading a stored archive again stored %d messages", now-last)
	}

	// An upload cut short (chunks 0 to 9 stored, no size record) resumes.
	cut := make([]byte, 20*protocol.WorkspaceChunkBytes)
	_, _ = rand.Read(cut)
	cutName := protocol.WorkspaceObjectName(sha256.Sum256(cut), false)
	cutDigest, _ := protocol.WorkspaceDigest(cutName)
	for i := range 10 {
		if _, err := js.Publish(ctx, names.WorkspaceChunkSubject(cutDigest, i), cut[i*protocol.WorkspaceChunkBytes:(i+1)*protocol.WorkspaceChunkBytes]); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := cl.PutWorkspace(ctx, bytes.NewReader(cut)); err != nil || got != cutName {
		t.Fatalf("the resumed upload: %q, %v", got, err)
	}
	if got, err := read(cutDigest); err != nil || !bytes.Equal(got, cut) {
		t.Fatalf("the resumed archive read back: %d bytes, %v", len(got), err)
	}

	// Out of order: chunk 2 first, then 0 and 1, then the size.
	// Digests other than the upload's (and than each other): one hex
	// digit changed, a different one each; a fixed prefix met the
	// random digest's own once in 128 runs (a chunk subject stored twice).
	otherThan := func(i int) string {
		const hex = "0123456789abcdef"
		return digest[:i] + string(hex[(strings.IndexByte(hex, digest[i])+1)%16]) + digest[i+1:]
	}
	other := otherThan(0)
	pub := func(subject string, body []byte) {
		t.Helper()
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	c := protocol.WorkspaceChunkBytes
	pub(names.WorkspaceChunkSubject(other, 2), data[2*c:2*c+10])
	pub(names.WorkspaceChunkSubject(other, 0), data[:c])
	pub(names.WorkspaceChunkSubject(other, 1), data[c:2*c])
	pub(names.WorkspaceSizeSubject(other), []byte("262154"))
	if got, err := read(other); err != nil || !bytes.Equal(got, data[:2*c+10]) {
		t.Fatalf("out of order: read %d bytes, %v", len(got), err)
	}

	short := otherThan(1)
	pub(names.WorkspaceChunkSubject(short, 0), data[:c-1])
	pub(names.WorkspaceSizeSubject(short), []byte("262144"))
	if _, err := read(short); !errors.Is(err, wsarchive.ErrBadChunk) {
		t.Fatalf("a short chunk, then a missing one: %v, want ErrBadChunk", err)
	}
	if _, err := read(otherThan(2)); !errors.Is(err, wsarchive.ErrNotStored) {
		t.Fatalf("no size record: %v, want ErrNotStored", err)
	}
}
