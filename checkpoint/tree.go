package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/batonhq/baton/internal/fstree"
)

// Errors a checkpoint or a restore wraps.
var (
	// ErrLimit: the tree is over a limit (bytes, entries, depth).
	ErrLimit = errors.New("checkpoint: over a limit")
	// ErrCorrupt: a manifest, an index or a data object is not what a
	// checkpoint writes, or they disagree.
	ErrCorrupt = errors.New("checkpoint: corrupt")
	// ErrNotFound: an object of the chain is not in the store.
	ErrNotFound = errors.New("checkpoint: not found")
)

// Defaults and bounds.
const (
	// DefaultMaxBytes bounds the bytes of a tree's files.
	DefaultMaxBytes = 1 << 30
	// DefaultMaxEntries bounds a tree's entries (files, directories and
	// links of both roots).
	DefaultMaxEntries = 200_000
	// MaxChain bounds the data objects a restore reads: past it, a
	// checkpoint is a new base.
	MaxChain = 8
	// MaxDepth bounds the directory levels below a root.
	MaxDepth = fstree.DefaultMaxDepth
	// maxManifestBytes bounds a manifest object as read.
	maxManifestBytes = 128 << 20
	version          = 1
)

// The roots a checkpoint holds: every name of its tree starts with one.
const (
	RootWorkspace = "workspace"
	RootHome      = "home"
)

// Kind is what an entry of a tree is.
type Kind byte

const (
	KindDir  Kind = 'd'
	KindFile Kind = 'f'
	KindLink Kind = 'l'
)

// Entry is one path of a tree as its stat saw it.
type Entry struct {
	Kind   Kind   `msgpack:"k"`
	Mode   uint32 `msgpack:"m"` // permission bits
	Size   int64  `msgpack:"s,omitempty"`
	Mtime  int64  `msgpack:"t,omitempty"` // nanoseconds
	Ctime  int64  `msgpack:"c,omitempty"`
	Ino    uint64 `msgpack:"i,omitempty"`
	Target string `msgpack:"l,omitempty"` // a link's
}

// same reports whether e is unchanged from old: a directory by its mode,
// a link by its target, a file by every field of its stat.
func (e Entry) same(old Entry) bool {
	if e.Kind != old.Kind || e.Mode != old.Mode {
		return false
	}
	switch e.Kind {
	case KindDir:
		return true
	case KindLink:
		return e.Target == old.Target
	}
	return e == old
}

// Index is a tree as a checkpoint or a restore left it: every path
// ("workspace/<rel>" or "home/<rel>") with its stat, and the paths in
// walk order (a directory before what it holds).
type Index struct {
	Paths   []string         `msgpack:"paths"`
	Entries map[string]Entry `msgpack:"entries"`
}

// Files and Bytes are the regular files of the tree and their sizes.
func (x *Index) Files() (n int, bytes int64) {
	for _, e := range x.Entries {
		if e.Kind == KindFile {
			n++
			bytes += e.Size
		}
	}
	return n, bytes
}

// changes lists the paths of cur that are new or changed since prev (in
// cur's order), the bytes of their files, and the paths of prev gone
// from cur (in prev's order).
func changes(prev, cur *Index) (changed []string, bytes int64, deleted []string) {
	for _, p := range cur.Paths {
		e := cur.Entries[p]
		if old, ok := prev.Entries[p]; ok && e.same(old) {
			continue
		}
		changed = append(changed, p)
		if e.Kind == KindFile {
			bytes += e.Size
		}
	}
	for _, p := range prev.Paths {
		if _, ok := cur.Entries[p]; !ok {
			deleted = append(deleted, p)
		}
	}
	return changed, bytes, deleted
}

// indexFile is an index as stored in a run's directory.
type indexFile struct {
	Version int `msgpack:"v"`
	Index
}

// MarshalIndex encodes x for UnmarshalIndex.
func MarshalIndex(x *Index) ([]byte, error) {
	return msgpack.Marshal(indexFile{Version: version, Index: *x})
}

// UnmarshalIndex decodes an index MarshalIndex encoded, and checks it:
// every path is a clean name under a root, listed once, with an entry.
func UnmarshalIndex(b []byte) (*Index, error) {
	var f indexFile
	if err := strictDecode(b, &f); err != nil {
		return nil, fmt.Errorf("%w: index: %v", ErrCorrupt, err)
	}
	if f.Version != version {
		return nil, fmt.Errorf("%w: index version %d, want %d", ErrCorrupt, f.Version, version)
	}
	if len(f.Paths) != len(f.Entries) {
		return nil, fmt.Errorf("%w: index lists %d paths and %d entries", ErrCorrupt, len(f.Paths), len(f.Entries))
	}
	for _, p := range f.Paths {
		e, ok := f.Entries[p]
		if !ok {
			return nil, fmt.Errorf("%w: index path %s has no entry (or is listed twice)", ErrCorrupt, fstree.Quote(p))
		}
		if err := checkPath(p); err != nil {
			return nil, fmt.Errorf("%w: index: %v", ErrCorrupt, err)
		}
		if e.Kind != KindDir && e.Kind != KindFile && e.Kind != KindLink {
			return nil, fmt.Errorf("%w: index path %s has kind %q", ErrCorrupt, fstree.Quote(p), e.Kind)
		}
	}
	if len(f.Entries) == 0 {
		f.Entries = map[string]Entry{}
	}
	return &f.Index, nil
}

// Manifest describes one checkpoint: its data object and the chain a
// restore reads.
type Manifest struct {
	Version int    `msgpack:"v"`
	Object  string `msgpack:"object"` // its data object
	Session string `msgpack:"session"`
	Run     string `msgpack:"run"`
	// Chain names the data objects a restore reads, base first, Object
	// last; a base's chain is Object alone.
	Chain []string `msgpack:"chain"`
	// ChainBytes is the files' bytes the chain's objects hold together.
	ChainBytes int64 `msgpack:"chainBytes"`
	// Entries are the paths Object holds, in its order; Deleted the paths
	// of the parent's tree that are gone.
	Entries []string `msgpack:"entries"`
	Deleted []string `msgpack:"deleted,omitempty"`
	// Files and TreeBytes are the regular files of the whole tree and
	// their bytes; Bytes is what Object holds of them.
	Files     int       `msgpack:"files"`
	TreeBytes int64     `msgpack:"treeBytes"`
	Bytes     int64     `msgpack:"bytes"`
	Created   time.Time `msgpack:"created"`
	// Notes name what the checkpoint skipped (a FIFO, a socket).
	Notes []string `msgpack:"notes,omitempty"`
}

// Full reports whether m is a base: its object holds the whole tree.
func (m *Manifest) Full() bool { return len(m.Chain) == 1 }

// MarshalManifest encodes m for UnmarshalManifest.
func MarshalManifest(m *Manifest) ([]byte, error) { return msgpack.Marshal(m) }

// UnmarshalManifest decodes and checks a manifest: its version, its
// names, its chain (Object last, at most MaxChain) and its paths.
func UnmarshalManifest(b []byte) (*Manifest, error) {
	if len(b) > maxManifestBytes {
		return nil, fmt.Errorf("%w: manifest of %d bytes, more than %d", ErrCorrupt, len(b), maxManifestBytes)
	}
	var m Manifest
	if err := strictDecode(b, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, fstree.Quote(m.Object), err)
	}
	return &m, nil
}

func (m *Manifest) check() error {
	switch {
	case m.Version != version:
		return fmt.Errorf("version %d, want %d", m.Version, version)
	case !ValidObject(m.Object):
		return errors.New("its object name is not a checkpoint's")
	case len(m.Chain) == 0 || len(m.Chain) > MaxChain || m.Chain[len(m.Chain)-1] != m.Object:
		return fmt.Errorf("its chain of %d objects does not end with it (at most %d)", len(m.Chain), MaxChain)
	case m.Files < 0 || m.TreeBytes < 0 || m.Bytes < 0 || m.ChainBytes < 0:
		return errors.New("a negative count")
	}
	for i, o := range m.Chain {
		if !ValidObject(o) || slices.Index(m.Chain, o) != i {
			return fmt.Errorf("chain object %s is not a checkpoint's, or is listed twice", fstree.Quote(o))
		}
	}
	for _, list := range [][]string{m.Entries, m.Deleted} {
		for _, p := range list {
			if err := checkPath(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPath checks a tree's path: a clean name under a root.
func checkPath(p string) error {
	root, rel, _ := strings.Cut(p, "/")
	if root != RootWorkspace && root != RootHome {
		return fmt.Errorf("path %s is under no root", fstree.Quote(p))
	}
	if clean, err := fstree.Clean(rel); err != nil || clean != rel || rel == "." {
		return fmt.Errorf("path %s is not a clean name", fstree.Quote(p))
	}
	return nil
}

// strictDecode decodes b into v and refuses trailing bytes.
func strictDecode(b []byte, v any) error {
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d bytes after the value", r.Len())
	}
	return nil
}

// plan is where a restore finds each path: the index in the chain of the
// object holding its last version, for the paths the head's tree has.
type plan map[string]int

// planOf works out the plan of the manifests of a chain, base first, and
// checks that they are one chain: each names the ones before it, and the
// first is a base.
func planOf(chain []*Manifest) (plan, error) {
	head := chain[len(chain)-1]
	if len(chain) != len(head.Chain) {
		return nil, fmt.Errorf("%w: %s's chain has %d objects, %d manifests read", ErrCorrupt, head.Object, len(head.Chain), len(chain))
	}
	p := plan{}
	for i, m := range chain {
		if m.Object != head.Chain[i] || !slices.Equal(m.Chain, head.Chain[:i+1]) {
			return nil, fmt.Errorf("%w: %s is not the chain's object %d of %s", ErrCorrupt, m.Object, i+1, head.Object)
		}
		for _, d := range m.Deleted {
			delete(p, d)
		}
		for _, e := range m.Entries {
			p[e] = i
		}
	}
	return p, nil
}

// needBase decides whether a checkpoint on top of parent, holding delta
// bytes of a tree of tree bytes, must be written whole instead: when there
// is no parent, when its chain would pass MaxChain objects, or when the
// chain would hold more than twice the tree's bytes (a restore then reads
// at most about twice what it writes).
func needBase(parent *Manifest, delta, tree int64) bool {
	if parent == nil {
		return true
	}
	if len(parent.Chain)+1 > MaxChain {
		return true
	}
	return parent.ChainBytes+delta > 2*tree+1<<20
}
