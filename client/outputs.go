package client

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
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
	st, err := c.js.Stream(ctx, c.names.EventsStream())
	if err != nil {
		return RunOutputs{}, hintNoStream(err, c.names.EventsStream())
	}
	m, err := st.GetLastMsgForSubject(ctx, c.names.StatusSubject(runID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return RunOutputs{}, fmt.Errorf("%w: %s has no status", ErrNotFound, runID)
	}
	if err != nil {
		return RunOutputs{}, fmt.Errorf("run %s: %w", runID, err)
	}
	status, err := protocol.ParseStatus(m.Data)
	if err != nil {
		return RunOutputs{}, fmt.Errorf("run %s: bad status: %w", runID, err)
	}
	if !status.Status.Terminal() {
		return RunOutputs{}, fmt.Errorf("%w: %s is %s", ErrNotEnded, runID, status.Status)
	}
	return RunOutputs{RunID: runID, Status: status.Status, Outputs: status.Outputs, Error: status.OutputsError, Notes: status.OutputsNotes}, nil
}

// GetOutput writes o's content to w, checking it against o's size and
// SHA-256 as it goes; on ErrDigest, w got bytes that must not be used.
//
// It reads the object's chunks with an ordered consumer of the bucket's
// stream, which expires by itself, so a client needs no right to delete
// consumers (deploy/nats-auth.conf).
func (c *Client) GetOutput(ctx context.Context, o protocol.Output, w io.Writer) error {
	bucket := c.names.OutputsBucket()
	obs, err := c.js.ObjectStore(ctx, bucket)
	if err != nil {
		return hintNoStream(err, bucket)
	}
	info, err := obs.GetInfo(ctx, o.Name)
	if err != nil {
		return fmt.Errorf("get %s: %w", o.Name, err)
	}
	h := sha256.New()
	var n uint64
	if info.Chunks > 0 {
		cons, err := c.js.OrderedConsumer(ctx, "OBJ_"+bucket, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{"$O." + bucket + ".C." + info.NUID},
		})
		if err != nil {
			return fmt.Errorf("get %s: %w", o.Name, err)
		}
		it, err := cons.Messages()
		if err != nil {
			return fmt.Errorf("get %s: %w", o.Name, err)
		}
		defer it.Stop()
		for range info.Chunks {
			m, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				return fmt.Errorf("get %s: %w", o.Name, err)
			}
			if n += uint64(len(m.Data())); n > o.Size {
				break // more than listed: never written past the size
			}
			h.Write(m.Data())
			if _, err := w.Write(m.Data()); err != nil {
				return err
			}
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
	obs, err := c.js.ObjectStore(ctx, c.names.OutputsBucket())
	if err != nil {
		return false, hintNoStream(err, c.names.OutputsBucket())
	}
	info, err := obs.GetInfo(ctx, name)
	if err != nil {
		return false, fmt.Errorf("get %s: %w", name, err)
	}
	return info.Metadata["baton-kind"] == outputs.KindSymlink, nil
}
