package client

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/outputs"
	"github.com/batonhq/baton/protocol"
)

var (
	// ErrNotEnded means the run has no terminal status yet, so nothing is
	// captured.
	ErrNotEnded = errors.New("client: run has not ended")
	// ErrDigest means an output read from the store is not what the run's
	// terminal status lists (size or SHA-256).
	ErrDigest = errors.New("client: output does not match its digest")
)

// RunOutputs is what a run's capture stored, as its terminal status lists it.
type RunOutputs struct {
	RunID   string
	Status  protocol.StatusType
	Outputs []protocol.Output
	// Error says why the capture stopped short; Notes name what it
	// skipped.
	Error string
	Notes []string
}

// Outputs returns what runID's capture stored, from its terminal status
// (which is published only once they are stored): an error wrapping
// ErrNotFound for an unknown run, ErrNotEnded for one still going.
func (c *Client) Outputs(ctx context.Context, runID string) (RunOutputs, error) {
	if !protocol.ValidRunID(runID) {
		return RunOutputs{}, fmt.Errorf("%w: %q", protocol.ErrBadRunID, runID)
	}
	m, ok, err := c.get(ctx, c.names.ReadStatusSubject(runID), "")
	switch {
	case err != nil:
		return RunOutputs{}, fmt.Errorf("run %s: %w", runID, err)
	case !ok:
		// No status yet: a run just started has its record already.
		if rec, err := c.Run(ctx, runID); err == nil {
			return RunOutputs{}, fmt.Errorf("%w: %s is %s; its outputs are captured when it ends", ErrNotEnded, runID, rec.State)
		} else if !errors.Is(err, ErrNotFound) {
			return RunOutputs{}, err
		}
		return RunOutputs{}, fmt.Errorf("%w: %s (no worker has started it)", ErrNotFound, runID)
	}
	status, err := protocol.ParseStatus(m.data)
	if err != nil {
		return RunOutputs{}, fmt.Errorf("run %s: bad status: %w", runID, err)
	}
	if !status.Status.Terminal() {
		return RunOutputs{}, fmt.Errorf("%w: %s is %s; its outputs are captured when it ends", ErrNotEnded, runID, status.Status)
	}
	return RunOutputs{RunID: runID, Status: status.Status, Outputs: status.Outputs, Error: status.OutputsError, Notes: status.OutputsNotes}, nil
}

// objectInfo reads the info of output object name through the read relay.
func (c *Client) objectInfo(ctx context.Context, name string) (jetstream.ObjectInfo, error) {
	runID, _, _ := strings.Cut(name, "/")
	if !protocol.ValidRunID(runID) {
		return jetstream.ObjectInfo{}, fmt.Errorf("%w: %q is not an output name", outputs.ErrBadName, name)
	}
	m, ok, err := c.get(ctx, c.names.ReadObjectSubject(runID), name)
	if err != nil {
		return jetstream.ObjectInfo{}, fmt.Errorf("get %s: %w", name, err)
	}
	var info jetstream.ObjectInfo
	if ok {
		if err := json.Unmarshal(m.data, &info); err != nil {
			return jetstream.ObjectInfo{}, fmt.Errorf("get %s: unreadable info: %w", name, err)
		}
	}
	if !ok || info.Deleted || info.Name != name {
		return jetstream.ObjectInfo{}, fmt.Errorf("get %s: %w", name, jetstream.ErrObjectNotFound)
	}
	return info, nil
}

// StoredOutput returns output object name ("<runId>/…") as the store holds
// it: its size, digest and (a file's) path, for GetOutput. An error wrapping
// jetstream.ErrObjectNotFound means there is no such object.
func (c *Client) StoredOutput(ctx context.Context, name string) (protocol.Output, error) {
	info, err := c.objectInfo(ctx, name)
	if err != nil {
		return protocol.Output{}, err
	}
	return protocol.Output{Name: name, Path: info.Metadata["baton-path"], Size: info.Size, Digest: info.Digest}, nil
}

// GetOutput writes o's content to w, checking it against o's size and
// SHA-256 as it goes; on ErrDigest, w got bytes that must not be used.
// It reads the object's info and chunks through the workers' read relay.
func (c *Client) GetOutput(ctx context.Context, o protocol.Output, w io.Writer) error {
	info, err := c.objectInfo(ctx, o.Name)
	if err != nil {
		return err
	}
	runID, _, _ := strings.Cut(o.Name, "/")
	h := sha256.New()
	var n uint64
	errOver := errors.New("more than listed")
	if info.Chunks > 0 {
		err := c.pages(ctx, c.names.ReadChunksSubject(runID), 1, o.Name, func(s stored) error {
			if n += uint64(len(s.data)); n > o.Size {
				return errOver // never written past the size
			}
			h.Write(s.data)
			_, err := w.Write(s.data)
			return err
		})
		if err != nil && !errors.Is(err, errOver) {
			return fmt.Errorf("get %s: %w", o.Name, err)
		}
	}
	if got := "SHA-256=" + base64.URLEncoding.EncodeToString(h.Sum(nil)); n != o.Size || got != o.Digest {
		return fmt.Errorf("%w: %s is %d bytes %s, listed %d bytes %s", ErrDigest, o.Name, n, got, o.Size, o.Digest)
	}
	return nil
}

// SaveOutput writes output o of runID under dir: the diff as diff.patch,
// a file as files/<its workspace path> (the name unescaped, kept inside
// dir), a captured link as a link. It writes to a temporary name and
// renames it once the digest checks, so a bad output leaves nothing
// behind. It returns the path written, relative to dir.
func (c *Client) SaveOutput(ctx context.Context, runID string, o protocol.Output, dir string) (string, error) {
	kind, rel, err := outputs.SplitOutput(runID, o)
	if err != nil {
		return "", err
	}
	dest := "diff.patch"
	if kind == outputs.KindFile {
		dest = path.Join("files", rel)
		if !filepath.IsLocal(dest) || strings.IndexByte(dest, 0) >= 0 {
			return "", fmt.Errorf("%w: %q would be written outside %s", outputs.ErrBadName, o.Name, dir)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if err := root.MkdirAll(path.Dir(dest), 0o755); err != nil {
		return "", err
	}
	link, err := c.isLink(ctx, o.Name)
	if err != nil {
		return "", err
	}
	if link {
		var b strings.Builder
		if err := c.GetOutput(ctx, o, &b); err != nil {
			return "", err
		}
		_ = root.Remove(dest)
		return dest, root.Symlink(b.String(), dest)
	}
	tmp := path.Join(path.Dir(dest), ".baton-get-"+path.Base(dest))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	err = c.GetOutput(ctx, o, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = root.Remove(tmp)
		return "", err
	}
	return dest, root.Rename(tmp, dest)
}

func (c *Client) isLink(ctx context.Context, name string) (bool, error) {
	info, err := c.objectInfo(ctx, name)
	if err != nil {
		return false, err
	}
	return info.Metadata["baton-kind"] == outputs.KindSymlink, nil
}
