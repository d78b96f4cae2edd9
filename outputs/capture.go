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
	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/fsat"
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
	// SkipTop are names at the workspace's top that are neither diffed
	// nor captured: ".git" of a cloned workspace, git's and not the
	// agent's work (the baseline is the commit's tree).
	SkipTop []string
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

// maxListed bounds the bytes of the file paths a capture lists on the
// terminal status, which is one message (max_payload, 1 MiB by default).
const maxListed = 512 << 10

// Capture stores what pol asks of the workspace at dir in obs under
// runID's names, the diff against src (nil: nothing was seeded) first,
// then the chosen files in path order. It returns an error only when the
// store failed or ctx ended (the caller may redo the capture: same names,
// same objects); a limit reached, or a workspace that cannot be read, is
// the Result's Error.
func Capture(ctx context.Context, obs jetstream.ObjectStore, runID, dir string, src Baseline, pol Policy) (res Result, err error) {
	if pol.Empty() {
		return res, nil
	}
	top, err := openWorkspace(dir)
	if errors.Is(err, fs.ErrNotExist) {
		res.Error = "the run has no workspace on this node"
		return res, nil
	}
	if err != nil {
		res.Error = "workspace not readable: " + err.Error()
		return res, nil
	}
	defer top.Close()
	if src == nil {
		src = FilesBaseline(nil)
	}
	base, err := src.top()
	if err != nil {
		res.Error = err.Error()
		return res, nil
	}
	w := &walker{ctx: ctx, pol: pol}
	defer func() {
		res.Notes = w.notes
		if w.dropped > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("and %d more", w.dropped))
		}
		if w.skipped > 0 && err == nil {
			skipped := fmt.Sprintf("%v: %d workspace entries were skipped, deeper than %d directories or with paths longer than %d bytes (see outputsNotes)",
				ErrLimit, w.skipped, MaxDepth, MaxPathBytes)
			res.Error = strings.TrimPrefix(res.Error+"; "+skipped, "; ")
		}
	}()
	// The files chosen, kept for their puts after the diff's: at most one
	// past the file limit, which stops the capture there.
	var files []entry
	choose := func(e *entry) {
		if e.file && len(files) <= pol.maxFiles() {
			c := *e
			c.dirfd, c.base = -1, nil
			files = append(files, c)
		}
	}
	budget := pol.maxBytes()
	if pol.Diff {
		info, err := putDiff(ctx, obs, runID, budget, func(bw *bufio.Writer, budget int64) error {
			return w.walk(top, base, func(e *entry) error {
				choose(e)
				if e.op == opSame {
					return nil
				}
				return writeEntry(bw, e, budget)
			})
		})
		var de *diffError
		switch {
		case errors.As(err, &de):
			res.Error = de.Error()
			return res, nil
		case err != nil:
			return res, fmt.Errorf("store %s: %w", DiffName(runID), err)
		}
		res.Outputs = append(res.Outputs, output(info, ""))
		budget -= int64(info.Size)
	} else {
		err := w.walk(top, base, func(e *entry) error {
			choose(e)
			return nil
		})
		var de *diffError
		switch {
		case errors.As(err, &de):
			res.Error = err.Error()
			return res, nil
		case err != nil:
			return res, err
		}
	}
	listed := 0
	for i := range files {
		e := &files[i]
		if i == pol.maxFiles() {
			res.Error = fmt.Sprintf("%v: more than %d files match the outputs patterns; stopped at %s", ErrLimit, pol.maxFiles(), shortPath(e.rel))
			return res, nil
		}
		if e.size > budget {
			res.Error = fmt.Sprintf("%v: %s (%d bytes) does not fit in what is left of limits.outputs (%d of %d bytes)",
				ErrLimit, shortPath(e.rel), e.size, max(budget, 0), pol.maxBytes())
			return res, nil
		}
		esc := EscapePath(e.rel)
		if listed += len(esc); listed > maxListed {
			res.Error = fmt.Sprintf("%v: the files' paths take more than the %d bytes a status lists; stopped at %s", ErrLimit, maxListed, shortPath(e.rel))
			return res, nil
		}
		info, err := putFile(ctx, obs, runID, int(top.Fd()), e)
		var de *diffError
		switch {
		case errors.As(err, &de):
			w.note("%s: not stored: %v", shortPath(e.rel), de.err)
			continue
		case err != nil:
			return res, fmt.Errorf("store %s (%s): %w", FileName(runID, e.rel), shortPath(e.rel), err)
		}
		res.Outputs = append(res.Outputs, output(info, esc))
		budget -= int64(info.Size)
	}
	return res, nil
}

// openWorkspace opens the directory dir, making it readable again when
// the agent took its permissions away and we own it.
func openWorkspace(dir string) (*os.File, error) {
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	return fsat.OpenDir(unix.AT_FDCWD, dir)
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

// putDiff stores the diff that write writes (within budget) as runID's
// diff object.
func putDiff(ctx context.Context, obs jetstream.ObjectStore, runID string, budget int64, write func(*bufio.Writer, int64) error) (*jetstream.ObjectInfo, error) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The store makes a chunk of each read, and a read of a pipe
		// returns one write: whole chunks, not a message per diff line.
		lw := bufio.NewWriterSize(pw, chunkSize)
		bw := bufio.NewWriterSize(&limitWriter{w: lw, n: budget, max: budget}, 64<<10)
		err := write(bw, budget)
		if err == nil {
			err = bw.Flush()
		}
		if err == nil {
			err = lw.Flush()
		}
		// A read of the workspace failed, not the store; the end of ctx
		// fails the store too.
		var de *diffError
		if err != nil && !errors.As(err, &de) && !errors.Is(err, io.ErrClosedPipe) && ctx.Err() == nil {
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

// putFile stores the chosen file e (relative to the workspace rootfd) as
// an object named by its path's digest, the path in its metadata.
func putFile(ctx context.Context, obs jetstream.ObjectStore, runID string, rootfd int, e *entry) (*jetstream.ObjectInfo, error) {
	meta := jetstream.ObjectMeta{
		Name:        FileName(runID, e.rel),
		Description: "baton: the workspace file at metadata baton-path",
		Metadata:    map[string]string{"baton-kind": KindFile, "baton-path": EscapePath(e.rel)},
	}
	if e.link {
		// Recorded as a link, never followed: its content is the target.
		meta.Metadata["baton-kind"] = KindSymlink
		return obs.Put(ctx, meta, strings.NewReader(e.target))
	}
	if e.exec {
		meta.Metadata["baton-mode"] = "0755"
	}
	f, _, err := fsat.OpenBeneath(rootfd, e.rel, EscapePath)
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
			return 0, &diffError{fmt.Errorf("%s grew while captured", shortPath(x.rel))}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > x.left {
		p = p[:x.left]
	}
	n, err := x.r.Read(p)
	x.left -= int64(n)
	if err == io.EOF && x.left > 0 {
		return n, &diffError{fmt.Errorf("%s shrank while captured", shortPath(x.rel))}
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func output(info *jetstream.ObjectInfo, path string) protocol.Output {
	return protocol.Output{Name: info.Name, Path: path, Size: info.Size, Digest: info.Digest}
}
