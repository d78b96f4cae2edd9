package checkpoint

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/fsat"
	"github.com/batonhq/baton/internal/fstree"
)

// chunkSize is the size of a stored object's chunks: larger than
// nats.go's default 128 KiB, so a tree of hundreds of MiB is fewer
// messages, and within any server's max_payload (1 MiB by default).
const chunkSize = 512 << 10

// Options say what a checkpoint is and what it builds on.
type Options struct {
	Session, Run string
	// Object is its data object: Name or SetupName of Session and Run.
	Object string
	// Parent is the session's checkpoint before it, and Index the tree as
	// Parent's restore (or Parent itself) left it; the checkpoint then
	// holds only what changed. Without either, it is a base.
	Parent *Manifest
	Index  *Index
	// Now stamps the manifest (zero: time.Now).
	Now time.Time
}

// Write stores a checkpoint of the tree t: its data object, then its
// manifest. It returns the manifest and the index of the tree as stored,
// which the next checkpoint of the same tree builds on. A tree over a
// limit fails with ErrLimit, and nothing is stored.
func Write(ctx context.Context, obs jetstream.ObjectStore, t Tree, o Options) (*Manifest, *Index, error) {
	if !ValidObject(o.Object) {
		return nil, nil, fmt.Errorf("checkpoint: %q is not a checkpoint's object name", o.Object)
	}
	cur, notes, err := Scan(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	files, treeBytes := cur.Files()
	m := &Manifest{
		Version: version, Object: o.Object, Session: o.Session, Run: o.Run,
		Files: files, TreeBytes: treeBytes, Created: o.Now, Notes: notes,
	}
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	m.Created = m.Created.UTC()
	var changed, deleted []string
	var delta int64
	if o.Parent != nil && o.Index != nil {
		changed, delta, deleted = changes(o.Index, cur)
	}
	if o.Index == nil || needBase(o.Parent, delta, treeBytes) {
		m.Chain, m.Entries, m.Bytes, m.ChainBytes = []string{o.Object}, cur.Paths, treeBytes, treeBytes
	} else {
		m.Chain = append(slices.Clone(o.Parent.Chain), o.Object)
		m.Entries, m.Deleted, m.Bytes, m.ChainBytes = changed, deleted, delta, o.Parent.ChainBytes+delta
	}
	if err := putData(ctx, obs, t, m, cur); err != nil {
		return nil, nil, err
	}
	b, err := MarshalManifest(m)
	if err != nil {
		return nil, nil, err
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{
		Name:        ManifestName(m.Object),
		Description: "baton: the manifest of a session's checkpoint (msgpack)",
		Metadata:    map[string]string{"baton-kind": "checkpoint-manifest"},
	}, bytes.NewReader(b)); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: store the manifest: %w", err)
	}
	return m, cur, nil
}

// readError is a failure reading the tree, as opposed to the store.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// putData stores m's data object: a tar of m.Entries as x lists them,
// read from the tree t.
func putData(ctx context.Context, obs jetstream.ObjectStore, t Tree, m *Manifest, x *Index) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The store makes a chunk of each read, and a read of a pipe
		// returns one write: whole chunks, not a message per header.
		bw := bufio.NewWriterSize(pw, chunkSize)
		err := writeTar(bw, t, m.Entries, x)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	_, err := obs.Put(ctx, jetstream.ObjectMeta{
		Name:        m.Object,
		Description: "baton: a session's checkpoint, a tar of workspace/ and home/",
		Metadata:    map[string]string{"baton-kind": "checkpoint", "baton-session": m.Session, "baton-run": m.Run},
		Opts:        &jetstream.ObjectMetaOptions{ChunkSize: chunkSize},
	}, pr)
	pr.CloseWithError(io.ErrClosedPipe) // unblocks the writer if the store failed
	<-done
	var re *readError
	if errors.As(err, &re) {
		return re.err
	}
	if err != nil {
		return fmt.Errorf("checkpoint: store %s: %w", m.Object, err)
	}
	return nil
}

// writeTar writes the entries paths of x, reading files from t.
func writeTar(w io.Writer, t Tree, paths []string, x *Index) error {
	var roots [2]*os.File
	for i, r := range t.roots() {
		f, err := fsat.OpenDir(unix.AT_FDCWD, r[1])
		if err != nil {
			return &readError{fmt.Errorf("checkpoint: the %s: %w", r[0], err)}
		}
		defer f.Close()
		roots[i] = f
	}
	tw := tar.NewWriter(w)
	for _, p := range paths {
		e := x.Entries[p]
		hdr := &tar.Header{Name: p, Mode: int64(e.Mode), ModTime: time.Unix(0, e.Mtime), Format: tar.FormatPAX}
		switch e.Kind {
		case KindDir:
			hdr.Typeflag, hdr.Name, hdr.ModTime = tar.TypeDir, p+"/", time.Time{}
		case KindLink:
			hdr.Typeflag, hdr.Linkname, hdr.ModTime = tar.TypeSymlink, e.Target, time.Time{}
		case KindFile:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.Kind != KindFile || e.Size == 0 {
			continue
		}
		root, rel, _ := strings.Cut(p, "/")
		rootfd := int(roots[0].Fd())
		if root == RootHome {
			rootfd = int(roots[1].Fd())
		}
		if err := copyFile(tw, rootfd, p, rel, e); err != nil {
			return err
		}
	}
	return tw.Close()
}

// copyFile copies the file rel of rootfd, listed as e, to w: the same
// file (its inode), with the size it was listed with.
func copyFile(w io.Writer, rootfd int, p, rel string, e Entry) error {
	f, st, err := fsat.OpenBeneath(rootfd, rel, fstree.Quote)
	if err != nil {
		return &readError{fmt.Errorf("checkpoint: %w", err)}
	}
	defer f.Close()
	changed := &readError{fmt.Errorf("checkpoint: %s changed while stored", fstree.Quote(p))}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Ino != e.Ino || st.Size() != e.Size {
		return changed
	}
	n, err := io.Copy(w, &readOnly{io.LimitReader(f, e.Size)})
	var re *readError
	switch {
	case errors.As(err, &re):
		return re
	case err != nil:
		return err // the store's
	case n != e.Size:
		return changed
	}
	return nil
}

// readOnly marks a file's read errors apart from the store's.
type readOnly struct{ r io.Reader }

func (r *readOnly) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = &readError{fmt.Errorf("checkpoint: %w", err)}
	}
	return n, err
}
