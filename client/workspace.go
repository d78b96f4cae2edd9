package client

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

// ErrWorkspacesFull is an upload the workspaces stream refused: it holds
// workspacesMaxBytes of archives already, until some expire
// (workspacesMaxAge).
var ErrWorkspacesFull = errors.New("the workspaces stream is full (workspacesMaxBytes)")

// Bounds of an upload's waits.
const (
	// workspaceAckTimeout bounds the wait for the stream's answer to one
	// chunk or record.
	workspaceAckTimeout = 30 * time.Second
	// workspaceWindow is how many chunks are in flight at once.
	workspaceWindow = 32
)

// PutWorkspace stores the archive r (a tar, or a gzipped tar) in the
// workspaces stream and returns its name, for a job's Workspace:
// "sha256-<hex>.tar.gz" (".tar" when it is not gzipped), named by its
// content, so uploading the same archive again stores nothing. r is
// spooled to a temporary file first: the name is known only at its end.
//
// The stream takes appends only (see protocol.WorkspaceChunkSubject):
// nothing stored can be read back, replaced or deleted by a client. A
// stored archive is known by the answer to a publish the stream refuses
// either way; an upload cut short resumes, its stored chunks kept.
func (c *Client) PutWorkspace(ctx context.Context, r io.Reader) (string, error) {
	tmp, err := os.CreateTemp("", "baton-workspace-*")
	if err != nil {
		return "", fmt.Errorf("put workspace: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	sum := sha256.New()
	br := bufio.NewReader(r)
	magic, _ := br.Peek(2)
	gzipped := len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b
	size, err := io.Copy(io.MultiWriter(tmp, sum), br)
	if err != nil {
		return "", fmt.Errorf("put workspace: %w", err)
	}
	name := protocol.WorkspaceObjectName([sha256.Size]byte(sum.Sum(nil)), gzipped)
	digest, _ := protocol.WorkspaceDigest(name)
	stream := c.names.WorkspacesStream()
	stored, err := c.workspaceStored(ctx, digest)
	if err != nil {
		return "", fmt.Errorf("put workspace %s: %w", name, hintNoStream(err, stream))
	}
	if stored {
		return name, nil
	}
	if err := c.putChunks(ctx, tmp, digest, uint64(size)); err != nil {
		return "", fmt.Errorf("put workspace %s: %w", name, hintNoStream(err, stream))
	}
	// Last: a size record says the upload is complete.
	ack, err := c.js.PublishMsgAsync(&nats.Msg{Subject: c.names.WorkspaceSizeSubject(digest), Data: strconv.AppendInt(nil, size, 10)},
		jetstream.WithExpectLastSequencePerSubject(0))
	if err == nil {
		err = waitStored(ctx, ack)
	}
	if err != nil {
		return "", fmt.Errorf("put workspace %s: %w", name, hintNoStream(err, stream))
	}
	return name, nil
}

// workspaceStored asks whether the archive of digest is stored, by a
// publish of its size record that expects a last sequence no subject
// reaches (2⁶³−1, the largest the server reads): the stream refuses it,
// saying the record's sequence, 0 when there is none. Any other answer (a
// replicated stream's in a race does not say it) is taken as not stored:
// the upload then stores what is missing.
func (c *Client) workspaceStored(ctx context.Context, digest string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, workspaceAckTimeout)
	defer cancel()
	_, err := c.js.PublishMsg(ctx, &nats.Msg{Subject: c.names.WorkspaceSizeSubject(digest)},
		jetstream.WithExpectLastSequencePerSubject(math.MaxInt64))
	var apiErr *jetstream.APIError
	if err == nil || !errors.As(err, &apiErr) {
		if err == nil {
			err = errors.New("the workspaces stream stored a probe it must refuse: is it baton's?")
		}
		return false, err
	}
	seq, found := strings.CutPrefix(apiErr.Description, "wrong last sequence: ")
	n, perr := strconv.ParseUint(seq, 10, 64)
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence && found && perr == nil && n > 0, nil
}

// putChunks publishes the size bytes of f as the archive digest's chunks,
// workspaceWindow at a time. A chunk already stored (an earlier upload cut
// short, or one at the same time) is left as it is.
func (c *Client) putChunks(ctx context.Context, f *os.File, digest string, size uint64) error {
	var inFlight []jetstream.PubAckFuture
	for i := range protocol.WorkspaceChunks(size) {
		if len(inFlight) == workspaceWindow {
			if err := waitStored(ctx, inFlight[0]); err != nil {
				return err
			}
			inFlight = inFlight[1:]
		}
		// A buffer per chunk: the publisher keeps it until its answer.
		buf := make([]byte, min(protocol.WorkspaceChunkBytes, size-uint64(i)*protocol.WorkspaceChunkBytes))
		if _, err := f.ReadAt(buf, int64(i)*protocol.WorkspaceChunkBytes); err != nil {
			return err
		}
		ack, err := c.js.PublishMsgAsync(&nats.Msg{Subject: c.names.WorkspaceChunkSubject(digest, i), Data: buf},
			jetstream.WithExpectLastSequencePerSubject(0))
		if err != nil {
			return fmt.Errorf("chunk %d: %w", i, err)
		}
		inFlight = append(inFlight, ack)
	}
	for _, ack := range inFlight {
		if err := waitStored(ctx, ack); err != nil {
			return err
		}
	}
	return nil
}

// waitStored waits for the stream's answer to an append: stored, or
// already there (any subject is stored once), or an error; the stream
// being full is ErrWorkspacesFull.
func waitStored(ctx context.Context, ack jetstream.PubAckFuture) error {
	timer := time.NewTimer(workspaceAckTimeout)
	defer timer.Stop()
	select {
	case <-ack.Ok():
		return nil
	case err := <-ack.Err():
		var apiErr *jetstream.APIError
		switch {
		case errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant):
			return nil
		case errors.As(err, &apiErr) && strings.Contains(apiErr.Description, "maximum bytes exceeded"):
			return fmt.Errorf("%w: %s", ErrWorkspacesFull, apiErr.Description)
		}
		return fmt.Errorf("%s: %w", ack.Msg().Subject, err)
	case <-timer.C:
		return fmt.Errorf("%s: no answer from the workspaces stream within %v", ack.Msg().Subject, workspaceAckTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PutWorkspaceDir stores dir as a gzipped tar with PutWorkspace: its
// files, directories and symbolic links (recorded as links, never
// followed), without sockets, devices and FIFOs, which a workspace
// archive may not hold.
func (c *Client) PutWorkspaceDir(ctx context.Context, dir string) (string, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(TarDir(pw, dir)) }()
	name, err := c.PutWorkspace(ctx, pr)
	pr.CloseWithError(io.ErrClosedPipe) // unblocks TarDir if the put failed
	return name, err
}

// TarDir writes dir as a gzipped tar to w, in path order, with the names
// relative to dir: what PutWorkspaceDir uploads.
func TarDir(w io.Writer, dir string) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if d.Type()&(fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe) != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		// Whose the files were here means nothing on a worker.
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, io.LimitReader(f, fi.Size()))
		return err
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
