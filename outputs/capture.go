package outputs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

// Defaults of a Policy's limits.
const (
	// DefaultMaxBytes bounds what one run stores (limits.outputs).
	DefaultMaxBytes = 256 << 20
	// DefaultMaxFiles bounds the file objects of one run (each is a few
	// round trips to the server; the diff holds any number of files).
	DefaultMaxFiles = 1000
	// DefaultMaxEntries bounds the workspace entries a capture lists, so
	// a tree of millions of files costs bounded time and memory.
	DefaultMaxEntries = 200_000
)

// Policy is what to capture from a run's workspace.
type Policy struct {
	// Diff asks for diff.patch: the workspace against its baseline.
	Diff bool
	// Files are patterns (see Match) of workspace files stored whole.
	Files []string
	// Within, when set, narrows Files: a file must match one of these too
	// (a job's patterns within its profile's).
	Within []string
	// MaxBytes bounds the bytes stored, diff included (0: DefaultMaxBytes).
	MaxBytes int64
	// MaxFiles bounds the file objects (0: DefaultMaxFiles).
	MaxFiles int
	// MaxEntries bounds the workspace entries listed (0: DefaultMaxEntries).
	MaxEntries int
}

// Empty reports whether p captures nothing.
func (p Policy) Empty() bool { return !p.Diff && len(p.Files) == 0 }

func (p Policy) maxBytes() int64 {
	if p.MaxBytes > 0 {
		return p.MaxBytes
	}
	return DefaultMaxBytes
}

func (p Policy) maxFiles() int {
	if p.MaxFiles > 0 {
		return p.MaxFiles
	}
	return DefaultMaxFiles
}

func (p Policy) maxEntries() int {
	if p.MaxEntries > 0 {
		return p.MaxEntries
	}
	return DefaultMaxEntries
}

// Result is what a capture stored, in the order stored, and what it could
// not.
type Result struct {
	Outputs []protocol.Output
	// Error says why the capture stopped short (a limit, an unreadable
	// workspace); what was stored before is in Outputs.
	Error string
	// Notes name what was skipped (a FIFO, a device, an unreadable file).
	Notes []string
}

// Capture stores what pol asks of the workspace at dir in obs under
// runID's names, the diff against src (nil: nothing was seeded) first,
// then the chosen files in path order. It returns an error only when the
// store failed (the caller may redo the capture: same names, same
// objects); a limit reached, or a workspace that cannot be read, is the
// Result's Error.
func Capture(ctx context.Context, obs jetstream.ObjectStore, runID, dir string, src Baseline, pol Policy) (res Result, err error) {
	if pol.Empty() {
		return res, nil
	}
	root, err := openWorkspace(dir)
	if errors.Is(err, fs.ErrNotExist) {
		res.Error = "the run has no workspace on this node"
		return res, nil
	}
	if err != nil {
		res.Error = "workspace not readable: " + err.Error()
		return res, nil
	}
	defer root.Close()
	if src == nil {
		src = FilesBaseline(nil)
	}
	base, err := src.entries()
	if err != nil {
		res.Error = err.Error()
		return res, nil
	}
	s, err := walk(root, src, base, pol)
	if err != nil {
		res.Error = err.Error()
		return res, nil
	}
	defer func() {
		res.Notes = s.notes
		if s.dropped > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("and %d more", s.dropped))
		}
	}()
	budget := pol.maxBytes()
	if pol.Diff {
		info, err := putDiff(ctx, obs, runID, root, s, src, base, budget)
		var de *diffError
		switch {
		case errors.As(err, &de):
			res.Error = de.Error()
			return res, nil
		case err != nil:
			return res, fmt.Errorf("store %s: %w", DiffName(runID), err)
		}
		res.Outputs = append(res.Outputs, output(info))
		budget -= int64(info.Size)
	}
	nfiles := 0
	for i := range s.entries {
		e := &s.entries[i]
		if !e.file {
			continue
		}
		if nfiles++; nfiles > pol.maxFiles() {
			res.Error = fmt.Sprintf("%v: more than %d files match the outputs patterns; stopped at %s", ErrLimit, pol.maxFiles(), EscapePath(e.rel))
			return res, nil
		}
		if e.size > budget {
			res.Error = fmt.Sprintf("%v: %s (%d bytes) does not fit in what is left of limits.outputs (%d of %d bytes)",
				ErrLimit, EscapePath(e.rel), e.size, max(budget, 0), pol.maxBytes())
			return res, nil
		}
		info, err := putFile(ctx, obs, runID, root, e)
		var de *diffError
		switch {
		case errors.As(err, &de):
			s.note("%s: not stored: %v", EscapePath(e.rel), de.err)
			continue
		case err != nil:
			return res, fmt.Errorf("store %s: %w", FileName(runID, e.rel), err)
		}
		res.Outputs = append(res.Outputs, output(info))
		budget -= int64(info.Size)
	}
	return res, nil
}

// openWorkspace opens dir as a root, making it readable again when the
// agent took its permissions away and we own it.
func openWorkspace(dir string) (*os.Root, error) {
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrPermission) {
		if cerr := os.Chmod(dir, 0o700); cerr == nil {
			root, err = os.OpenRoot(dir)
		}
	}
	return root, err
}

// diffError is a failure of the workspace side of a put (a limit, a file
// that cannot be read), as opposed to the store's.
type diffError struct{ err error }

func (e *diffError) Error() string { return e.err.Error() }
func (e *diffError) Unwrap() error { return e.err }

// limitWriter fails once more than n bytes are written.
type limitWriter struct {
	w   io.Writer
	n   int64
	max int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, &diffError{fmt.Errorf("%w: the diff is larger than what is left of limits.outputs (%d bytes)", ErrLimit, l.max)}
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}

// chunkSize is the size of a stored object's chunks (nats.go's default).
const chunkSize = 128 << 10

func putDiff(ctx context.Context, obs jetstream.ObjectStore, runID string, root *os.Root, s *scan, src Baseline, base map[string]baseEntry, budget int64) (*jetstream.ObjectInfo, error) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The store makes a chunk of each read, and a read of a pipe
		// returns one write: whole chunks, not a message per diff line.
		bw := bufio.NewWriterSize(pw, chunkSize)
		err := writeDiff(&limitWriter{w: bw, n: budget, max: budget}, root, s, src, base, budget)
		if err == nil {
			err = bw.Flush()
		}
		var de *diffError
		if err != nil && !errors.As(err, &de) && !errors.Is(err, io.ErrClosedPipe) {
			err = &diffError{fmt.Errorf("diff: %w", err)}
		}
		pw.CloseWithError(err)
	}()
	info, err := obs.Put(ctx, jetstream.ObjectMeta{
		Name:        DiffName(runID),
		Description: "baton: the workspace's changes against its seed, git unified diff",
		Metadata:    map[string]string{"baton-kind": KindDiff},
		Opts:        &jetstream.ObjectMetaOptions{ChunkSize: chunkSize},
	}, pr)
	pr.CloseWithError(io.ErrClosedPipe) // unblocks the writer if the store failed
	<-done
	return info, err
}

func putFile(ctx context.Context, obs jetstream.ObjectStore, runID string, root *os.Root, e *entry) (*jetstream.ObjectInfo, error) {
	meta := jetstream.ObjectMeta{
		Name:     FileName(runID, e.rel),
		Metadata: map[string]string{"baton-kind": KindFile, "baton-path": EscapePath(e.rel)},
	}
	if e.link {
		// Recorded as a link, never followed: its content is the target.
		meta.Metadata["baton-kind"] = KindSymlink
		return obs.Put(ctx, meta, strings.NewReader(e.target))
	}
	if e.exec {
		meta.Metadata["baton-mode"] = "0755"
	}
	f, _, err := openRegular(root, e.rel)
	if err != nil {
		return nil, &diffError{err}
	}
	defer f.Close()
	return obs.Put(ctx, meta, &exactReader{r: f, left: e.size, rel: e.rel})
}

// exactReader reads exactly left bytes, failing when the file is shorter or
// longer than it was when listed, so a stored object is never cut short
// nor over its accounted size.
type exactReader struct {
	r    io.Reader
	left int64
	rel  string
}

func (x *exactReader) Read(p []byte) (int, error) {
	if x.left == 0 {
		var one [1]byte
		if n, _ := x.r.Read(one[:]); n > 0 {
			return 0, &diffError{fmt.Errorf("%s grew while captured", EscapePath(x.rel))}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > x.left {
		p = p[:x.left]
	}
	n, err := x.r.Read(p)
	x.left -= int64(n)
	if err == io.EOF && x.left > 0 {
		return n, &diffError{fmt.Errorf("%s shrank while captured", EscapePath(x.rel))}
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func output(info *jetstream.ObjectInfo) protocol.Output {
	return protocol.Output{Name: info.Name, Size: info.Size, Digest: info.Digest}
}
