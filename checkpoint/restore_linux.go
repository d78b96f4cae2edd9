package checkpoint

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/fstree"
	"github.com/batonhq/baton/internal/unpack"
)

// Dest is where a restore writes a session's tree: two empty roots.
type Dest struct {
	Workspace, Home *os.Root
	// Chown gives what is written to UID and GID (a root worker's sandbox
	// ids).
	Chown    bool
	UID, GID int
	// MaxBytes and MaxEntries bound each root's extraction (0:
	// DefaultMaxBytes, DefaultMaxEntries).
	MaxBytes   int64
	MaxEntries int
}

// ReadManifest reads the manifest of the data object o.
func ReadManifest(ctx context.Context, obs jetstream.ObjectStore, o string) (*Manifest, error) {
	r, err := obs.Get(ctx, ManifestName(o))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: the manifest of %s", ErrNotFound, fstree.Quote(o))
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read the manifest of %s: %w", fstree.Quote(o), err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read the manifest of %s: %w", fstree.Quote(o), err)
	}
	m, err := UnmarshalManifest(b)
	if err != nil {
		return nil, err
	}
	if m.Object != o {
		return nil, fmt.Errorf("%w: the manifest of %s names %s", ErrCorrupt, fstree.Quote(o), fstree.Quote(m.Object))
	}
	return m, nil
}

// ReadChain reads the manifests of the chain of the data object head,
// base first, and checks they are one chain.
func ReadChain(ctx context.Context, obs jetstream.ObjectStore, head string) ([]*Manifest, error) {
	hm, err := ReadManifest(ctx, obs, head)
	if err != nil {
		return nil, err
	}
	chain := make([]*Manifest, len(hm.Chain))
	chain[len(chain)-1] = hm
	for i, o := range hm.Chain[:len(hm.Chain)-1] {
		if chain[i], err = ReadManifest(ctx, obs, o); err != nil {
			return nil, err
		}
	}
	if _, err := planOf(chain); err != nil {
		return nil, err
	}
	return chain, nil
}

// Restore writes the tree of the checkpoint whose data object is head
// into d: each path once, from the object of its chain that holds its
// last version, with the rules of a workspace archive (unpack). A
// failed restore leaves a partial tree, which the caller discards.
func Restore(ctx context.Context, obs jetstream.ObjectStore, head string, d Dest) (*Manifest, error) {
	chain, err := ReadChain(ctx, obs, head)
	if err != nil {
		return nil, err
	}
	p, _ := planOf(chain) // checked by ReadChain
	if d.MaxBytes <= 0 {
		d.MaxBytes = DefaultMaxBytes
	}
	if d.MaxEntries <= 0 {
		d.MaxEntries = DefaultMaxEntries
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var outs [2]*extraction
	for i, root := range []*os.Root{d.Workspace, d.Home} {
		outs[i] = extract(ctx, root, d)
	}
	paths := len(p)
	err = feed(ctx, obs, chain, p, outs)
	for _, x := range outs {
		if xerr := x.close(err); err == nil {
			err = xerr
		}
	}
	if err == nil && len(p) > 0 {
		err = fmt.Errorf("%w: the objects of %s hold %d of the %d paths its manifests list", ErrCorrupt, fstree.Quote(head), paths-len(p), paths)
	}
	if err != nil {
		return nil, err
	}
	return chain[len(chain)-1], nil
}

// extraction is one root's unpack.Extract, fed a tar through a pipe.
type extraction struct {
	pw   *io.PipeWriter
	tw   *tar.Writer
	done chan error
}

func extract(ctx context.Context, root *os.Root, d Dest) *extraction {
	pr, pw := io.Pipe()
	x := &extraction{pw: pw, tw: tar.NewWriter(pw), done: make(chan error, 1)}
	go func() {
		_, err := unpack.Extract(ctx, pr, root, unpack.Options{
			// Names count against unpack's bytes, not a checkpoint's.
			Limits:    unpack.Limits{MaxBytes: d.MaxBytes + int64(d.MaxEntries)*512, MaxEntries: d.MaxEntries, MaxDepth: MaxDepth},
			Chown:     d.Chown,
			UID:       d.UID,
			GID:       d.GID,
			LinksAsIs: true,
		})
		pr.CloseWithError(fmt.Errorf("the extraction ended: %w", err))
		x.done <- err
	}()
	return x
}

// close ends the tar (after a feed that failed: cuts it short) and
// returns the extraction's error.
func (x *extraction) close(feedErr error) error {
	if feedErr == nil {
		feedErr = x.tw.Close()
	}
	x.pw.CloseWithError(feedErr)
	err := <-x.done
	if err != nil {
		return fmt.Errorf("checkpoint: restore: %w", err)
	}
	return nil
}

// feed streams each chain object's entries that the plan keeps to the
// extraction of their root, and takes each path it wrote off the plan.
func feed(ctx context.Context, obs jetstream.ObjectStore, chain []*Manifest, p plan, outs [2]*extraction) error {
	for i, m := range chain {
		r, err := obs.Get(ctx, m.Object)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("%w: %s", ErrNotFound, fstree.Quote(m.Object))
		}
		if err != nil {
			return fmt.Errorf("checkpoint: read %s: %w", fstree.Quote(m.Object), err)
		}
		err = feedObject(r, i, p, outs)
		if err == nil {
			// The digest is checked at the object's end.
			if _, err = io.Copy(io.Discard, r); err != nil {
				err = fmt.Errorf("%w: %s: %v", ErrCorrupt, fstree.Quote(m.Object), err)
			}
		}
		r.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// feedObject streams the entries of object i that the plan keeps.
func feedObject(r io.Reader, i int, p plan, outs [2]*extraction) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: tar: %v", ErrCorrupt, err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if at, ok := p[name]; !ok || at != i {
			continue // a later object has it, or deleted it
		}
		root, rel, _ := strings.Cut(name, "/")
		out := outs[0]
		if root == RootHome {
			out = outs[1]
		}
		h := *hdr
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.PAXRecords, h.Xattrs = rel, 0, 0, "", "", nil, nil
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		if err := out.tw.WriteHeader(&h); err != nil {
			return err
		}
		if _, err := io.Copy(out.tw, tr); err != nil {
			return err
		}
		delete(p, name) // written once
	}
}
