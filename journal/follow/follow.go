package follow

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/batonhq/baton/journal"
)

// Follow defaults.
const (
	DefaultBatch = 512 // lines per call of Follow's fn
)

var (
	// ErrInvalid is a bad argument or option.
	ErrInvalid = errors.New("follow: invalid argument")
	// ErrTruncated means the journal became shorter than what was already
	// read from it. The runner only appends, so someone else rewrote it.
	ErrTruncated = errors.New("follow: journal truncated")
)

// Result is where Follow stopped.
type Result struct {
	Sentinel *journal.Sentinel // nil unless the run's sentinel was read
	// Offset is just past the last line fn accepted (== the start of the
	// sentinel line when Sentinel != nil): where a successor resumes.
	Offset int64
	// Trailing counts the bytes after the sentinel line when Follow
	// returned. They are never delivered: the runner writes nothing after
	// the sentinel, so anything there was appended by someone else, and a
	// caller may want to say so.
	Trailing int64
}

// Option configures Follow.
type Option func(*options) error

type options struct {
	maxLine    int
	batch      int
	readBuffer int
	interval   time.Duration
	check      func() error
	on         <-chan struct{}
}

// WithBatch sets the most lines handed to fn in one call (default
// DefaultBatch).
func WithBatch(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: batch %d", ErrInvalid, n)
		}
		o.batch = n
		return nil
	}
}

// WithCheck makes Follow call check each time interval passes with no new
// data, to learn what the journal cannot say: that the runner died without
// a sentinel, or that the caller lost its lease. When check fails, Follow
// reads once more to deliver everything already appended, then returns an
// error wrapping check's (or the sentinel and no error, if the drain reached
// it). check runs on Follow's goroutine.
func WithCheck(interval time.Duration, check func() error) Option {
	return func(o *options) error {
		if interval <= 0 || check == nil {
			return fmt.Errorf("%w: check needs a positive interval and a function", ErrInvalid)
		}
		o.interval, o.check = interval, check
		return nil
	}
}

// WithCheckOn makes Follow call check when on closes, instead of every
// interval: the caller closes on when the runner ended (a pidfd's event)
// or its lease was lost, so an idle Follow does no periodic work. A check
// that fails ends Follow as in WithCheck; one that passes (the event said
// nothing conclusive) stops the watch of on, and Follow goes on with the
// interval of a WithCheck if one is given. Given with WithCheck, both call
// the check given last.
func WithCheckOn(on <-chan struct{}, check func() error) Option {
	return func(o *options) error {
		if on == nil || check == nil {
			return fmt.Errorf("%w: check on an event needs a channel and a function", ErrInvalid)
		}
		o.on, o.check = on, check
		return nil
	}
}

// Follow streams complete lines of the journal at path, from byte offset
// `from`, to fn, until the real sentinel (matching nonce) is read, ctx
// ends, fn fails, or a check fails.
//
// fn gets every complete line available (up to the batch size, and what
// the read buffer holds) in one call, so it can publish them as one batch;
// the lines, Data included, are valid only until it returns. Lines longer
// than the max line come with nil Data. The sentinel is never delivered,
// nor is anything after it (see Result.Trailing), nor a partial last line.
// A line that looks like a sentinel with another nonce is an ordinary line.
//
// Follow waits on inotify, never polls: it arms its watch before it reads,
// so an append racing the read still wakes it. If the journal does not
// exist yet, Follow waits for it to appear; its directory must exist.
// Neither the journal nor its directory may be a symbolic link, and the
// journal must be a regular file (ErrNotPlain, see OpenNoLinks). The
// nonce must be 1 to 256 bytes of letters, digits and "-_.~+/=" (as
// NewNonce makes), else Follow fails with ErrInvalid, since no line could
// ever end the run.
//
// On return, Result.Offset is where a successor resumes. The error is nil
// only when the sentinel was read; else it is ctx.Err(), fn's error as is,
// a check's error wrapped, ErrOffsetBeyondEnd (from is past the journal's
// end, or from > 0 and there is no journal), ErrTruncated, ErrInvalid, or an
// I/O error.
func Follow(ctx context.Context, path string, from int64, nonce string, fn func(lines []Line) error, opts ...Option) (Result, error) {
	o := options{maxLine: DefaultMaxLine, batch: DefaultBatch, readBuffer: DefaultReadBuffer}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return Result{Offset: from}, err
		}
	}
	sentinel, ok := journal.NewSentinelMatcher(nonce)
	if !ok {
		return Result{Offset: from}, fmt.Errorf("%w: nonce must be 1 to 256 bytes of letters, digits and -_.~+/=", ErrInvalid)
	}
	if from < 0 {
		return Result{Offset: from}, fmt.Errorf("%w: negative offset %d", ErrInvalid, from)
	}
	path, err := resolve(path)
	if err != nil {
		return Result{Offset: from}, err
	}
	wt, err := watchers.watch(path)
	if err != nil {
		return Result{Offset: from}, err
	}
	defer wt.close()
	fl := &follower{ctx: ctx, path: path, sentinel: sentinel, fn: fn, o: o, wake: wt.wake, res: Result{Offset: from}}
	defer fl.closeFile()
	return fl.run()
}

// resolve makes path absolute with no symbolic link in its directory, the
// form events name it by.
func resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("follow: %s: %w", path, err)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", fmt.Errorf("follow: %s: directory: %w", path, err)
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}

// follower is the state of one Follow call.
type follower struct {
	ctx      context.Context
	path     string
	sentinel journal.SentinelMatcher
	fn       func([]Line) error
	o        options
	wake     <-chan struct{}

	f           *os.File // nil until the journal exists
	s           *splitter
	res         Result
	sentinelEnd int64
}

func (fl *follower) run() (Result, error) {
	var (
		timer *time.Timer
		tick  <-chan time.Time
	)
	if fl.o.interval > 0 {
		timer = time.NewTimer(fl.o.interval)
		defer timer.Stop()
		tick = timer.C
	}
	on := fl.o.on
	failed := func(cerr error) (Result, error) {
		// What was appended before the check failed is part of the run:
		// deliver it, and the sentinel may be among it.
		if _, done, err := fl.drain(); err != nil || done {
			return fl.res, err
		}
		return fl.res, fmt.Errorf("follow: %s: %w", fl.path, cerr)
	}
	for {
		read, done, err := fl.drain()
		if err != nil || done {
			return fl.res, err
		}
		if read && timer != nil {
			timer.Reset(fl.o.interval)
		}
		select {
		case <-fl.ctx.Done():
			return fl.res, fl.ctx.Err()
		case <-fl.wake:
		case <-on:
			if cerr := fl.o.check(); cerr != nil {
				return failed(cerr)
			}
			on = nil
		case <-tick:
			if cerr := fl.o.check(); cerr != nil {
				return failed(cerr)
			}
			timer.Reset(fl.o.interval)
		}
	}
}

// drain delivers every complete line appended so far. read reports new
// bytes; done, that the sentinel was read.
func (fl *follower) drain() (read, done bool, err error) {
	if fl.f == nil {
		if err := fl.open(); err != nil || fl.f == nil {
			return false, false, err
		}
	}
	n, stopped, err := fl.s.pump(fl, fl.o.batch, fl.stop, fl.deliver)
	if err != nil {
		fl.res.Sentinel = nil // its preceding lines were not all delivered
		if cerr := fl.ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			err = cerr // as is, not wrapped by the read
		}
		return n > 0, false, err
	}
	if stopped {
		if st, err := fl.f.Stat(); err == nil {
			fl.res.Trailing = st.Size() - fl.sentinelEnd
		}
		return true, true, nil
	}
	if n == 0 {
		// Woken with nothing new: make sure the journal did not shrink
		// under us, or we would wait for bytes that never come.
		if st, err := fl.f.Stat(); err == nil && st.Size() < fl.s.pos() {
			return false, false, fmt.Errorf("%w: %s is %d bytes, %d were read", ErrTruncated, fl.path, st.Size(), fl.s.pos())
		}
	}
	return n > 0, false, nil
}

// open opens the journal at the start offset, leaving f nil if it does not
// exist yet.
func (fl *follower) open() error {
	f, err := journal.OpenNoLinks(fl.path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if fl.res.Offset > 0 {
			return fmt.Errorf("%w: offset %d, and %s does not exist", ErrOffsetBeyondEnd, fl.res.Offset, fl.path)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: follow: %w", err)
	}
	if err := seekTo(f, fl.res.Offset); err != nil {
		f.Close()
		return err
	}
	fl.f = f
	fl.s = newSplitter(fl.res.Offset, fl.o.readBuffer, fl.o.maxLine)
	return nil
}

func (fl *follower) closeFile() {
	if fl.f != nil {
		fl.f.Close()
	}
}

// Read reads the journal for the splitter, and stops as soon as ctx ends:
// a line that never ends, written faster than it is read, delivers nothing
// for deliver to check ctx on.
func (fl *follower) Read(p []byte) (int, error) {
	if err := fl.ctx.Err(); err != nil {
		return 0, err
	}
	return fl.f.Read(p)
}

// stop reports the run's sentinel.
func (fl *follower) stop(ln Line) bool {
	if ln.Data == nil {
		return false // longer than the max line: Writer.Finish keeps the sentinel short
	}
	s, ok := fl.sentinel.Match(ln.Data)
	if ok {
		fl.res.Sentinel, fl.sentinelEnd = &s, ln.End
	}
	return ok
}

func (fl *follower) deliver(lines []Line) error {
	if err := fl.ctx.Err(); err != nil {
		return err
	}
	if err := fl.fn(lines); err != nil {
		return err
	}
	fl.res.Offset = lines[len(lines)-1].End
	return nil
}
