package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
)

func TestMain(m *testing.M) {
	// Followers share one inotify instance; its goroutine must end with the
	// last follower.
	goleak.VerifyTestMain(m)
}

// recorder collects what Follow delivers, copying Data, and checks each
// batch on the way: within the batch limit, contiguous from the start.
type recorder struct {
	t       testing.TB
	batch   int
	next    int64
	lines   []Line
	text    []byte // every delivered line and its '\n'
	batches int
}

func newRecorder(t testing.TB, from int64, batch int) *recorder {
	return &recorder{t: t, batch: batch, next: from}
}

func (r *recorder) fn(lines []Line) error {
	if len(lines) == 0 || len(lines) > r.batch {
		r.t.Errorf("batch of %d lines, limit %d", len(lines), r.batch)
	}
	r.batches++
	for _, ln := range lines {
		if ln.Start != r.next {
			r.t.Errorf("line starts at %d, want %d", ln.Start, r.next)
		}
		r.next = ln.End
		c := ln
		c.Data = bytes.Clone(ln.Data)
		r.lines = append(r.lines, c)
		r.text = append(append(r.text, ln.Data...), '\n')
	}
	return nil
}

func openWriter(t testing.TB, path string) *journal.Writer {
	t.Helper()
	w, err := journal.OpenWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func appendFile(t testing.TB, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Error(err)
	}
}

type followed struct {
	res Result
	err error
}

// follow runs Follow in a goroutine and returns a channel for its outcome.
func follow(ctx context.Context, path string, from int64, nonce string, fn func([]Line) error, opts ...Option) <-chan followed {
	ch := make(chan followed, 1)
	go func() {
		res, err := Follow(ctx, path, from, nonce, fn, opts...)
		ch <- followed{res, err}
	}()
	return ch
}

func wait(t testing.TB, ch <-chan followed) followed {
	t.Helper()
	select {
	case f := <-ch:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return")
		return followed{}
	}
}

// agentOutput is what a lively agent prints: lines of all kinds, a forged
// sentinel, and a last line it never ends.
func agentOutput(rng *rand.Rand, n int) []byte {
	var b []byte
	for i := range n {
		switch rng.IntN(10) {
		case 0:
			b = append(b, '\n')
		case 1:
			b = append(b, fmt.Sprintf("{\"i\":%d,\"crlf\":true}\r\n", i)...)
		case 2:
			b = append(b, "\xff\xfe invalid \xc3\n"...)
		case 3:
			b = append(b, "é€😀 multi-byte\n"...)
		case 4:
			b = append(b, journal.Sentinel{Exit: 0, Nonce: journal.NewNonce(), Reason: journal.ReasonExit}.Line()...)
		default:
			b = append(b, fmt.Sprintf("{\"type\":\"text\",\"i\":%d,\"text\":%q}\n", i, bytes.Repeat([]byte("x"), rng.IntN(300)))...)
		}
	}
	return append(b, "partial last line"...)
}

// TestFollowLiveAppends follows a journal a goroutine appends to in pieces
// of random size at a rate, ending it with Writer.Finish: what Follow
// delivers, each line and its '\n', is the journal up to the sentinel byte
// for byte, in contiguous offsets, and the sentinel itself never.
func TestFollowLiveAppends(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		max  int
		bat  int
	}{
		{"defaults", nil, DefaultMaxLine, DefaultBatch},
		{"small buffer and batch", []Option{WithReadBuffer(64), WithBatch(3), WithMaxLine(100)}, 100, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.ndjson")
			nonce := journal.NewNonce()
			rng := rand.New(rand.NewPCG(1, 2))
			out := agentOutput(rng, 3000)
			w := openWriter(t, path)
			rec := newRecorder(t, 0, tc.bat)
			ch := follow(context.Background(), path, 0, nonce, rec.fn, tc.opts...)
			want := journal.Sentinel{Exit: 3, Nonce: nonce, Reason: journal.ReasonExit}
			go func() {
				for rest := out; len(rest) > 0; {
					n := min(len(rest), 1+rng.IntN(700))
					if _, err := w.Write(rest[:n]); err != nil {
						t.Error(err)
					}
					rest = rest[n:]
					if rng.IntN(8) == 0 {
						time.Sleep(200 * time.Microsecond)
					}
				}
				if err := w.Finish(want); err != nil {
					t.Error(err)
				}
			}()
			f := wait(t, ch)
			if f.err != nil {
				t.Fatal(f.err)
			}
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sentinelAt := int64(len(out) + 1) // Finish ended the partial line
			if f.res.Sentinel == nil || *f.res.Sentinel != want || f.res.Offset != sentinelAt || f.res.Trailing != 0 {
				t.Fatalf("result %+v (sentinel %+v), want sentinel %+v at %d", f.res, f.res.Sentinel, want, sentinelAt)
			}
			if !bytes.Equal(file[sentinelAt:], want.Line()) {
				t.Fatalf("journal ends with %q", file[sentinelAt:])
			}
			checkLines(t, file[:sentinelAt], 0, rec.lines, tc.max)
			if tc.max == DefaultMaxLine && !bytes.Equal(rec.text, file[:sentinelAt]) {
				t.Fatal("delivered lines differ from the journal")
			}
			t.Logf("%d lines in %d calls", len(rec.lines), rec.batches)
		})
	}
}

func TestFollowForgedSentinelIsOrdinary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.ndjson")
	nonce := journal.NewNonce()
	forged := []string{
		string(bytes.TrimSuffix(journal.Sentinel{Exit: 0, Nonce: journal.NewNonce()}.Line(), []byte("\n"))),
		`{"__exit":0,"__nonce":"` + nonce + `","type":"x"}`, // right nonce, extra key
		`{"__exit":"0","__nonce":"` + nonce + `"}`,          // right nonce, string exit
		`{"__exit":0,"__nonce":"` + nonce + `"} trailing`,
	}
	var data string
	for _, l := range forged {
		data += l + "\n"
	}
	real := journal.Sentinel{Exit: 1, Nonce: nonce, Reason: journal.ReasonExit}
	writeFile(t, filepath.Dir(path), append([]byte(data), real.Line()...))
	rec := newRecorder(t, 0, DefaultBatch)
	res, err := Follow(context.Background(), path, 0, nonce, rec.fn)
	if err != nil || res.Sentinel == nil || *res.Sentinel != real || res.Offset != int64(len(data)) {
		t.Fatalf("Follow = %+v, %v", res, err)
	}
	if string(rec.text) != data {
		t.Fatalf("delivered %q, want the forged lines %q", rec.text, data)
	}
}

func TestFollowTrailingBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.ndjson")
	nonce := journal.NewNonce()
	s := journal.Sentinel{Exit: 0, Nonce: nonce, Reason: journal.ReasonExit}
	writeFile(t, filepath.Dir(path), append(append([]byte("a\n"), s.Line()...), "after\nmore"...))
	rec := newRecorder(t, 0, DefaultBatch)
	res, err := Follow(context.Background(), path, 0, nonce, rec.fn)
	if err != nil || res.Sentinel == nil || res.Offset != 2 || res.Trailing != int64(len("after\nmore")) {
		t.Fatalf("Follow = %+v, %v", res, err)
	}
	if string(rec.text) != "a\n" {
		t.Fatalf("delivered %q: nothing after the sentinel may be", rec.text)
	}
}

func TestFollowResumesFromOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.ndjson")
	nonce := journal.NewNonce()
	writeFile(t, filepath.Dir(path), append([]byte("one\ntwo\nthree\n"), journal.Sentinel{Nonce: nonce}.Line()...))
	rec := newRecorder(t, 4, DefaultBatch)
	res, err := Follow(context.Background(), path, 4, nonce, rec.fn)
	if err != nil || res.Sentinel == nil || res.Offset != 14 || string(rec.text) != "two\nthree\n" {
		t.Fatalf("Follow from 4 = %+v, %v, delivered %q", res, err, rec.text)
	}
	// From the sentinel itself: nothing to deliver, the sentinel is read.
	res, err = Follow(context.Background(), path, 14, nonce, func([]Line) error { t.Error("delivered a line"); return nil })
	if err != nil || res.Sentinel == nil || res.Offset != 14 {
		t.Fatalf("Follow from the sentinel = %+v, %v", res, err)
	}
}

func TestFollowFinishEndsPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.ndjson")
	nonce := journal.NewNonce()
	w := openWriter(t, path)
	if _, err := w.Write([]byte("done\nno newline")); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	ch := follow(context.Background(), path, 0, nonce, func(lines []Line) error {
		for _, ln := range lines {
			got <- string(ln.Data)
		}
		return nil
	})
	if l := <-got; l != "done" {
		t.Fatalf("first line %q", l)
	}
	select {
	case l := <-got:
		t.Fatalf("partial line delivered as %q", l)
	case <-time.After(50 * time.Millisecond):
	}
	s := journal.Sentinel{Exit: 0, Nonce: nonce, Reason: journal.ReasonExit}
	if err := w.Finish(s); err != nil {
		t.Fatal(err)
	}
	f := wait(t, ch)
	if f.err != nil || f.res.Sentinel == nil || *f.res.Sentinel != s || f.res.Offset != int64(len("done\nno newline\n")) {
		t.Fatalf("Follow = %+v, %v", f.res, f.err)
	}
	if l := <-got; l != "no newline" {
		t.Fatalf("the partial line, ended by Finish, came as %q", l)
	}
}

func TestFollowWaitsForJournal(t *testing.T) {
	dir := journal.Dir(t.TempDir())
	nonce := journal.NewNonce()
	rec := newRecorder(t, 0, DefaultBatch)
	var checks atomic.Int32
	ch := follow(context.Background(), dir.Journal(), 0, nonce, rec.fn,
		WithCheck(5*time.Millisecond, func() error { checks.Add(1); return nil }))
	// The follower is waiting on a file that does not exist, and checks
	// meanwhile: wait, bounded, for a check (30 ms was not always one on a
	// loaded machine).
	testenv.WaitFor(t, 10*time.Second, "a check while the journal is missing", func() bool { return checks.Load() > 0 })
	// Other files of the run directory do not disturb it.
	appendFile(t, dir.Stderr(), "noise\n")
	w := openWriter(t, dir.Journal())
	if _, err := w.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(journal.Sentinel{Exit: 0, Nonce: nonce}); err != nil {
		t.Fatal(err)
	}
	f := wait(t, ch)
	if f.err != nil || f.res.Sentinel == nil || string(rec.text) != "hello\n" {
		t.Fatalf("Follow = %+v, %v, delivered %q", f.res, f.err, rec.text)
	}
	if checks.Load() == 0 {
		t.Fatal("the check never ran while the journal was missing")
	}
}

func TestFollowArguments(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, []byte("abc\n"))
	nonce := journal.NewNonce()
	nop := func([]Line) error { return nil }
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		path  string
		from  int64
		nonce string
		opts  []Option
		want  error
	}{
		{"past the end", path, 5, nonce, nil, ErrOffsetBeyondEnd},
		{"offset into a missing journal", filepath.Join(dir, "none"), 1, nonce, nil, ErrOffsetBeyondEnd},
		{"missing directory", filepath.Join(dir, "none", "journal.ndjson"), 0, nonce, nil, fs.ErrNotExist},
		{"negative offset", path, -1, nonce, nil, ErrInvalid},
		{"empty nonce", path, 0, "", nil, ErrInvalid},
		{"nonce with a quote", path, 0, `a"b`, nil, ErrInvalid},
		{"max line", path, 0, nonce, []Option{WithMaxLine(0)}, ErrInvalid},
		{"batch", path, 0, nonce, []Option{WithBatch(0)}, ErrInvalid},
		{"read buffer", path, 0, nonce, []Option{WithReadBuffer(-1)}, ErrInvalid},
		{"check interval", path, 0, nonce, []Option{WithCheck(0, func() error { return nil })}, ErrInvalid},
		{"nil check", path, 0, nonce, []Option{WithCheck(time.Second, nil)}, ErrInvalid},
		{"check on no channel", path, 0, nonce, []Option{WithCheckOn(nil, func() error { return nil })}, ErrInvalid},
		{"nil check on a channel", path, 0, nonce, []Option{WithCheckOn(make(chan struct{}), nil)}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Follow(ctx, tc.path, tc.from, tc.nonce, nop, tc.opts...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Follow = %v, want %v", err, tc.want)
			}
			if res.Offset != tc.from || res.Sentinel != nil {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// TestFollowCheckDrains: when the check fails, what was appended before is
// delivered, even though no event announced it yet, and the error says why.
func TestFollowCheckDrains(t *testing.T) {
	errDead := errors.New("runner dead")
	t.Run("no sentinel", func(t *testing.T) {
		path := writeFile(t, t.TempDir(), []byte("first\n"))
		rec := newRecorder(t, 0, DefaultBatch)
		var calls int
		res, err := Follow(context.Background(), path, 0, journal.NewNonce(), rec.fn,
			WithCheck(10*time.Millisecond, func() error {
				calls++
				if calls < 3 {
					return nil
				}
				// The runner's last words, then it is found dead: Follow
				// is not waiting, so only the drain can deliver them.
				appendFile(t, path, "last words\npartial")
				return errDead
			}))
		if !errors.Is(err, errDead) {
			t.Fatalf("Follow = %v, want it to wrap %v", err, errDead)
		}
		if string(rec.text) != "first\nlast words\n" || res.Offset != int64(len("first\nlast words\n")) || res.Sentinel != nil {
			t.Fatalf("result %+v, delivered %q", res, rec.text)
		}
	})
	t.Run("sentinel in the drain", func(t *testing.T) {
		path := writeFile(t, t.TempDir(), nil)
		nonce := journal.NewNonce()
		s := journal.Sentinel{Exit: 0, Nonce: nonce, Reason: journal.ReasonExit}
		rec := newRecorder(t, 0, DefaultBatch)
		res, err := Follow(context.Background(), path, 0, nonce, rec.fn,
			WithCheck(10*time.Millisecond, func() error {
				appendFile(t, path, "bye\n"+string(s.Line()))
				return errDead
			}))
		if err != nil || res.Sentinel == nil || *res.Sentinel != s || string(rec.text) != "bye\n" {
			t.Fatalf("Follow = %+v, %v, delivered %q: the sentinel wins over the failed check", res, err, rec.text)
		}
	})
	t.Run("missing journal", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.ndjson")
		res, err := Follow(context.Background(), path, 0, journal.NewNonce(), func([]Line) error { return nil },
			WithCheck(5*time.Millisecond, func() error { return errDead }))
		if !errors.Is(err, errDead) || res.Offset != 0 {
			t.Fatalf("Follow = %+v, %v", res, err)
		}
	})
	t.Run("not while data flows", func(t *testing.T) {
		// The interval counts from the last new data: every check comes
		// at least an interval after the last delivery, though lines
		// arrive all along, every 10 ms, for 300 ms.
		const interval = 50 * time.Millisecond
		path := writeFile(t, t.TempDir(), nil)
		nonce := journal.NewNonce()
		var lastData time.Time
		var checks int
		ch := follow(context.Background(), path, 0, nonce, func([]Line) error {
			lastData = time.Now()
			return nil
		}, WithCheck(interval, func() error {
			checks++
			if since := time.Since(lastData); !lastData.IsZero() && since < interval {
				t.Errorf("check ran %v after new data, within the %v interval", since, interval)
			}
			return nil
		}))
		for range 30 {
			appendFile(t, path, "tick\n")
			time.Sleep(10 * time.Millisecond)
		}
		appendFile(t, path, string(journal.Sentinel{Nonce: nonce}.Line()))
		if f := wait(t, ch); f.err != nil || f.res.Sentinel == nil {
			t.Fatalf("Follow = %+v, %v", f.res, f.err)
		}
		t.Logf("%d checks", checks)
	})
}

func TestFollowContextCancel(t *testing.T) {
	path := writeFile(t, t.TempDir(), []byte("a\nb\n"))
	ctx, cancel := context.WithCancel(context.Background())
	delivered := make(chan struct{})
	ch := follow(ctx, path, 0, journal.NewNonce(), func([]Line) error { close(delivered); return nil })
	<-delivered
	cancel()
	f := wait(t, ch)
	if !errors.Is(f.err, context.Canceled) || f.res.Offset != 4 {
		t.Fatalf("Follow = %+v, %v", f.res, f.err)
	}
	// A context that is already done delivers nothing.
	res, err := Follow(ctx, path, 0, journal.NewNonce(), func([]Line) error { t.Error("delivered"); return nil })
	if !errors.Is(err, context.Canceled) || res.Offset != 0 {
		t.Fatalf("Follow with a done context = %+v, %v", res, err)
	}
}

func TestFollowFnError(t *testing.T) {
	path := writeFile(t, t.TempDir(), []byte("a\nb\nc\nd\n"))
	boom := errors.New("publish failed")
	var calls int
	res, err := Follow(context.Background(), path, 0, journal.NewNonce(), func(lines []Line) error {
		if calls++; calls == 2 {
			return boom
		}
		return nil
	}, WithBatch(2))
	if err != boom || res.Offset != 4 {
		t.Fatalf("Follow = %+v, %v; want offset 4 (the first batch) and the error as is", res, err)
	}
}

func TestFollowLongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.ndjson")
	nonce := journal.NewNonce()
	long := bytes.Repeat([]byte("z"), 5000)
	data := append(append([]byte("short\n"), long...), "\nend\n"...)
	writeFile(t, filepath.Dir(path), append(slices.Clone(data), journal.Sentinel{Nonce: nonce}.Line()...))
	rec := newRecorder(t, 0, DefaultBatch)
	res, err := Follow(context.Background(), path, 0, nonce, rec.fn, WithMaxLine(1024), WithReadBuffer(128))
	if err != nil || res.Sentinel == nil {
		t.Fatalf("Follow = %+v, %v", res, err)
	}
	checkLines(t, data, 0, rec.lines, 1024)
	if len(rec.lines) != 3 || rec.lines[1].Data != nil || rec.lines[1].Start != 6 || rec.lines[1].End != 5007 {
		t.Fatalf("lines %+v", rec.lines)
	}
}

func TestFollowTruncated(t *testing.T) {
	path := writeFile(t, t.TempDir(), []byte("a\nb\n"))
	delivered := make(chan struct{})
	ch := follow(context.Background(), path, 0, journal.NewNonce(), func([]Line) error { close(delivered); return nil })
	<-delivered
	if err := os.Truncate(path, 1); err != nil {
		t.Fatal(err)
	}
	if f := wait(t, ch); !errors.Is(f.err, ErrTruncated) || f.res.Offset != 4 {
		t.Fatalf("Follow = %+v, %v, want ErrTruncated", f.res, f.err)
	}
}

// TestFollowLatency measures append to delivery on an idle follower: an
// inotify wake-up, no sleep, takes well under a millisecond; the bound is
// loose for noisy machines.
func TestFollowLatency(t *testing.T) {
	path := writeFile(t, t.TempDir(), nil)
	nonce := journal.NewNonce()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := make(chan time.Time, 1)
	ch := follow(context.Background(), path, 0, nonce, func([]Line) error {
		seen <- time.Now()
		return nil
	})
	var lat []time.Duration
	for i := range 50 {
		time.Sleep(2 * time.Millisecond) // let the follower go idle
		t0 := time.Now()
		if _, err := fmt.Fprintf(f, "{\"i\":%d}\n", i); err != nil {
			t.Fatal(err)
		}
		select {
		case t1 := <-seen:
			lat = append(lat, t1.Sub(t0))
		case <-time.After(5 * time.Second):
			t.Fatal("appended line never delivered")
		}
	}
	if _, err := f.Write(journal.Sentinel{Nonce: nonce}.Line()); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, ch); r.err != nil || r.res.Sentinel == nil {
		t.Fatalf("Follow = %+v, %v", r.res, r.err)
	}
	slices.Sort(lat)
	t.Logf("append→fn latency: median %v, p90 %v, max %v", lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1])
	if lat[len(lat)/2] > 50*time.Millisecond {
		t.Fatalf("median latency %v, want well under 50ms", lat[len(lat)/2])
	}
}

// TestFollowManyJournals runs more followers at once than the kernel's
// default 128 inotify instances per user: they share one.
func TestFollowManyJournals(t *testing.T) {
	const n = 200
	root := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	var live sync.WaitGroup // every follower has delivered its first line
	live.Add(n)
	for i := range n {
		dir := journal.Dir(filepath.Join(root, fmt.Sprint(i)))
		if err := os.Mkdir(string(dir), 0o750); err != nil {
			t.Fatal(err)
		}
		nonce := journal.NewNonce()
		wg.Add(2)
		go func() {
			defer wg.Done()
			var text []byte
			res, err := Follow(context.Background(), dir.Journal(), 0, nonce, func(lines []Line) error {
				if len(text) == 0 {
					live.Done()
				}
				for _, ln := range lines {
					text = append(append(text, ln.Data...), '\n')
				}
				return nil
			})
			if err == nil && (res.Sentinel == nil || string(text) != fmt.Sprintf("run %d\nbye\n", i)) {
				err = fmt.Errorf("run %d: result %+v, delivered %q", i, res, text)
			}
			errs <- err
		}()
		go func() {
			defer wg.Done()
			w, err := journal.OpenWriter(dir.Journal())
			if err != nil {
				errs <- err
				return
			}
			if _, err := fmt.Fprintf(w, "run %d\n", i); err != nil {
				errs <- err
			}
			live.Wait() // all n are being followed at once before any ends
			if _, err := w.Write([]byte("bye\n")); err != nil {
				errs <- err
			}
			errs <- w.Finish(journal.Sentinel{Nonce: nonce})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkFollow measures a follower keeping up with a writer appending
// 200-byte lines in 4 KiB writes, as a pipe hands them to the runner.
func BenchmarkFollow(b *testing.B) {
	lines := benchLines(20000)
	path := filepath.Join(b.TempDir(), "journal.ndjson")
	b.SetBytes(int64(len(lines)))
	b.ReportAllocs()
	for b.Loop() {
		os.Remove(path)
		w := openWriter(b, path)
		nonce := journal.NewNonce()
		ch := follow(context.Background(), path, 0, nonce, func([]Line) error { return nil })
		for rest := lines; len(rest) > 0; {
			n := min(4096, len(rest))
			w.Write(rest[:n])
			rest = rest[n:]
		}
		w.Finish(journal.Sentinel{Nonce: nonce})
		if f := wait(b, ch); f.err != nil || f.res.Offset != int64(len(lines)) {
			b.Fatalf("Follow = %+v, %v", f.res, f.err)
		}
	}
	b.ReportMetric(float64(20000*b.N)/b.Elapsed().Seconds(), "lines/s")
}

// TestFollowCancelInsideEndlessLine: an agent writing one line without end,
// faster than it is read, cannot keep Follow from ending with ctx. The
// journal is a sparse file of 1 TiB of zeros: always more bytes, never a
// '\n'.
func TestFollowCancelInsideEndlessLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.ndjson")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<40); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := follow(ctx, path, 0, journal.NewNonce(), func([]Line) error { t.Error("delivered a line"); return nil }, WithMaxLine(1<<20))
	time.Sleep(20 * time.Millisecond)
	cancel()
	if f := wait(t, ch); f.err != context.Canceled || f.res.Offset != 0 {
		t.Fatalf("Follow = %+v, %v; want ctx.Err() as is", f.res, f.err)
	}
}

// TestFinishClipsDetail: however long the failure's detail, the sentinel
// stays a line a follower reads.
func TestFinishClipsDetail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.ndjson")
	nonce := journal.NewNonce()
	w := openWriter(t, path)
	detail := strings.Repeat("€", DefaultMaxLine/3+1) // over the max line; 4096 bytes cut the 1366th character
	if err := w.Finish(journal.Sentinel{Exit: -1, Nonce: nonce, Reason: journal.ReasonError, Detail: detail}); err != nil {
		t.Fatal(err)
	}
	res, err := Follow(context.Background(), path, 0, nonce, func([]Line) error { return nil })
	if err != nil || res.Sentinel == nil {
		t.Fatalf("Follow = %+v, %v", res, err)
	}
	if d := res.Sentinel.Detail; d != detail[:4095] {
		t.Fatalf("detail of %d bytes, want the first 1365 characters", len(d))
	}
}

// TestFollowCheckOn: with an event instead of an interval, the check runs
// only when the event comes (never while Follow idles), what was appended
// before it is delivered, and a check that passes leaves Follow following.
func TestFollowCheckOn(t *testing.T) {
	errDead := errors.New("runner dead")
	t.Run("fails", func(t *testing.T) {
		path := writeFile(t, t.TempDir(), []byte("first\n"))
		rec := newRecorder(t, 0, DefaultBatch)
		on := make(chan struct{})
		var calls atomic.Int32
		ch := follow(context.Background(), path, 0, journal.NewNonce(), rec.fn, WithCheckOn(on, func() error {
			calls.Add(1)
			appendFile(t, path, "last words\n")
			return errDead
		}))
		time.Sleep(300 * time.Millisecond)
		if n := calls.Load(); n != 0 {
			t.Fatalf("the check ran %d times before its event", n)
		}
		close(on)
		got := wait(t, ch)
		if !errors.Is(got.err, errDead) || calls.Load() != 1 {
			t.Fatalf("Follow = %v after %d checks, want it to wrap %v after one", got.err, calls.Load(), errDead)
		}
		if string(rec.text) != "first\nlast words\n" || got.res.Offset != int64(len("first\nlast words\n")) {
			t.Fatalf("result %+v, delivered %q", got.res, rec.text)
		}
	})
	t.Run("passes", func(t *testing.T) {
		path := writeFile(t, t.TempDir(), nil)
		nonce := journal.NewNonce()
		rec := newRecorder(t, 0, DefaultBatch)
		on := make(chan struct{})
		var calls atomic.Int32
		ch := follow(context.Background(), path, 0, nonce, rec.fn, WithCheckOn(on, func() error {
			calls.Add(1)
			return nil
		}))
		close(on)
		for deadline := time.Now().Add(5 * time.Second); calls.Load() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the check did not run within 5s of its event")
			}
		}
		s := journal.Sentinel{Exit: 0, Nonce: nonce, Reason: journal.ReasonExit}
		appendFile(t, path, "more\n"+string(s.Line()))
		got := wait(t, ch)
		if got.err != nil || got.res.Sentinel == nil || string(rec.text) != "more\n" || calls.Load() != 1 {
			t.Fatalf("Follow = %+v, %v after %d checks, delivered %q", got.res, got.err, calls.Load(), rec.text)
		}
	})
}
