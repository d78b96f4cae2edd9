package worker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// Environment of the child process TestHugeLine runs its publishers in.
const (
	hugeChildEnv = "BATON_TEST_HUGE_LINE_CHILD" // "first" or "resume"
	hugeURLEnv   = "BATON_TEST_HUGE_LINE_URL"
	hugeDirEnv   = "BATON_TEST_HUGE_LINE_DIR"
	hugeNonce    = "huge-line-nonce"
	hugeRunID    = "huge"
	// maxPublisherRSS is the most memory a worker may take to publish a
	// line of any length (issue 13).
	maxPublisherRSS = 64 << 20
)

// TestHugeLine: one journal line far longer than the follower's max line
// goes out in chunks read from the journal a chunk at a time, and so does
// its rest after a takeover (Align, then resumeLine): neither publisher's
// peak RSS reaches 64 MiB, and the chunks join to the line byte for byte.
// Each publisher is a child process, so its peak RSS (VmHWM) is its own,
// not the embedded server's; under the race detector, whose shadow memory
// dwarfs it, the bound holds for the child's sampled Go heap in use, and
// the line is 96 MiB. The line is 256 MiB; BATON_SOAK=1 makes it
// 2 GiB, the size issue 13 names.
func TestHugeLine(t *testing.T) {
	if role := os.Getenv(hugeChildEnv); role != "" {
		hugeLineChild(t, role)
		return
	}
	size := int64(256 << 20)
	if raceEnabled {
		size = 96 << 20 // still more than the bound, were it held whole
	}
	if os.Getenv("BATON_SOAK") != "" {
		size = 2 << 30
	}
	s := testenv.RunServer(t)
	nc, js := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	names := protocol.MustNames("")
	if _, err := provision.Ensure(ctx, js, names, provision.Options{LeaseTTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lineHash := writeHugeJournal(t, journal.Dir(dir).Journal(), size)

	child := func(role string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestHugeLine$", "-test.v")
		cmd.Env = append(os.Environ(), hugeChildEnv+"="+role, hugeURLEnv+"="+nc.ConnectedUrl(), hugeDirEnv+"="+dir)
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s publisher: %v\n%s", role, err, out)
		}
		report := func(key string) int64 {
			_, rest, _ := bytes.Cut(out, []byte(key+"="))
			if f := bytes.Fields(rest); len(f) > 0 {
				if n, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return n
				}
			}
			t.Fatalf("%s publisher reported no %s:\n%s", role, key, out)
			return 0
		}
		rss, heap := report("peak-rss-bytes"), report("peak-heap-bytes")
		t.Logf("%s publisher: peak RSS %.1f MiB, peak Go heap in use %.1f MiB", role, float64(rss)/(1<<20), float64(heap)/(1<<20))
		what, peak := "RSS", rss
		if raceEnabled {
			what, peak = "Go heap in use (RSS is the race detector's)", heap
		}
		if peak >= maxPublisherRSS {
			t.Errorf("%s publisher's peak %s is %d bytes, the bound is %d", role, what, peak, maxPublisherRSS)
		}
	}
	start := time.Now()
	child("first")
	child("resume")
	t.Logf("published a %d MiB line in %v", size>>20, time.Since(start).Round(time.Millisecond))

	// The chain: the line's chunks 1..n in order, some of the first
	// publisher and the rest of its successor, then nothing else.
	cons, err := js.OrderedConsumer(ctx, names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{names.RunFilter(hugeRunID)}})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	epochs := map[string]int{}
	n := 0
	for i := 1; n == 0 || i <= n; i++ {
		m, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		hd := m.Headers()
		chunk := hd.Get(protocol.HeaderChunk)
		if n == 0 {
			if _, total, ok := strings.Cut(chunk, "/"); ok {
				n, _ = strconv.Atoi(total)
			}
		}
		if want := fmt.Sprintf("%d/%d", i, n); chunk != want || m.Subject() != names.RawSubject(hugeRunID) ||
			hd.Get(protocol.HeaderOffset) != strconv.FormatInt(size+1, 10) {
			t.Fatalf("message %d: chunk %q on %s at offset %s; want chunk %s on the raw subject at %d",
				i, chunk, m.Subject(), hd.Get(protocol.HeaderOffset), want, size+1)
		}
		epochs[hd.Get(protocol.HeaderEpoch)]++
		h.Write(m.Data())
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != lineHash {
		t.Fatalf("the %d chunks join to sha256 %s, the line is %s", n, got, lineHash)
	}
	if len(epochs) != 2 {
		t.Fatalf("chunks by epoch %v: want some of each publisher", epochs)
	}
	if m, err := cons.Next(jetstream.FetchMaxWait(200 * time.Millisecond)); !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		t.Fatalf("after the line's %d chunks: %v %v", n, m, err)
	}
}

// writeHugeJournal writes a journal of one line of size bytes and the
// sentinel, and returns the line's sha256. The file is sparse: a stamp
// every 64 KiB between holes, so every chunk differs from its neighbours
// while the disk holds a few MiB.
func writeHugeJournal(t *testing.T, path string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < size; off += 64 << 10 {
		stamp := fmt.Appendf(nil, "a%d;", off)
		if _, err := f.WriteAt(stamp[:min(int64(len(stamp)), size-off)], off); err != nil {
			t.Fatal(err)
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
		t.Fatal(err)
	}
	w, err := journal.OpenWriter(path) // appends the newline and the sentinel
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(journal.Sentinel{Nonce: hugeNonce, Reason: journal.ReasonExit}); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// hugeLineChild publishes the huge line as the worker does and prints its
// peak RSS: "first" follows the journal from its start and stops halfway
// through the line's chunks (a worker that died); "resume" aligns on the
// chain, finishes the line and follows the journal to its sentinel.
func hugeLineChild(t *testing.T, role string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	nc, err := nats.Connect(os.Getenv(hugeURLEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	names := protocol.MustNames("")
	leases, err := js.KeyValue(ctx, names.LeasesBucket())
	if err != nil {
		t.Fatal(err)
	}
	lv, err := lease.Live(ctx, js, kv.NewStore[kv.LeaseRecord](leases), lease.Holder{Worker: role, Node: "n"}, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lv.Close(context.Background()) }()
	l, err := lv.Acquire(ctx, hugeRunID)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(context.Background(), 0, 0) }()
	// Sampled: a line held whole would be in use for the whole publish.
	var peakHeap atomic.Uint64
	go func() {
		var ms runtime.MemStats
		for ; ; time.Sleep(10 * time.Millisecond) {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
		}
	}()
	r := &run{id: hugeRunID, dir: journal.Dir(os.Getenv(hugeDirEnv)), lease: l}
	pos, err := publisher.Align(ctx, js, names, hugeRunID)
	if err != nil {
		t.Fatal(err)
	}
	r.chain = publisher.NewChain(js, names, hugeRunID, pos.Seq, publisher.WithEpoch(l.Epoch()))
	pubCtx := ctx
	switch role {
	case "first":
		// Stop publishing once about half of the line's chunks are out.
		st, err := os.Stat(r.dir.Journal())
		if err != nil {
			t.Fatal(err)
		}
		half := uint64(st.Size() / int64(nc.MaxPayload()) / 2)
		var stop context.CancelFunc
		pubCtx, stop = context.WithCancel(ctx)
		go func() {
			for pubCtx.Err() == nil && r.chain.LastSeq() < half {
				time.Sleep(5 * time.Millisecond)
			}
			stop()
		}()
	case "resume":
		if !pos.Partial() {
			t.Fatalf("the chain's last message %+v is not a chunk of an unfinished line", pos)
		}
		if err := r.resumeLine(ctx, pos); err != nil {
			t.Fatal(err)
		}
		r.offset = pos.Offset
	}
	res, err := follow.Follow(pubCtx, r.dir.Journal(), r.offset, hugeNonce, func(lines []follow.Line) error {
		return r.publish(pubCtx, lines)
	}, follow.WithBatch(publisher.DefaultBatchMessages))
	switch {
	case role == "first" && !errors.Is(err, context.Canceled):
		t.Fatalf("first publisher: want it stopped halfway through the line, got %v (%+v)", err, res)
	case role == "resume" && (err != nil || res.Sentinel == nil):
		t.Fatalf("resuming publisher: %v (%+v)", err, res)
	}
	fmt.Printf("peak-rss-bytes=%d peak-heap-bytes=%d\n", peakRSS(t), peakHeap.Load())
}

// peakRSS is this process's peak resident set size (VmHWM).
func peakRSS(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// TestLineStart: the start of a line found from its end, across blocks.
func TestLineStart(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	j := []byte("one\n\n" + long + "\nlast\n")
	r := bytes.NewReader(j)
	for _, c := range []struct{ end, start int64 }{
		{4, 0}, {5, 4}, {int64(6 + len(long)), 5}, {int64(len(j)), int64(len(j)) - 5},
	} {
		if got, err := lineStart(r, c.end); err != nil || got != c.start {
			t.Errorf("line ending at %d starts at %d (%v), want %d", c.end, got, err, c.start)
		}
	}
	for _, end := range []int64{0, 3, int64(len(j)) + 1} {
		if _, err := lineStart(r, end); err == nil {
			t.Errorf("line ending at %d: no error", end)
		}
	}
}
