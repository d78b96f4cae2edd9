package publisher_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// TestStorageFullStallsWithoutLoss: when JetStream has no room (the
// server's store is full, or the events stream is at its MaxBytes and
// refuses new messages), a chain's publishing waits, says so once, and
// loses nothing: once space is freed it resumes, and the chain holds
// every line exactly once, in order, byte for byte.
func TestStorageFullStallsWithoutLoss(t *testing.T) {
	const storeMax = 8 << 20
	for _, tc := range []struct {
		name     string
		server   func(*server.Options)
		opts     provision.Options
		fill     func(b *backend) string // publishes until refused; returns the subject filled
		wantCode jetstream.ErrorCode
		free     func(ctx context.Context, b *backend) error
	}{
		{
			name:   "server store full",
			server: func(o *server.Options) { o.JetStreamMaxStore = storeMax },
			fill: func(b *backend) string {
				if _, err := b.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill"}}); err != nil {
					t.Fatal(err)
				}
				return "fill"
			},
			wantCode: 10023,
			free: func(ctx context.Context, b *backend) error {
				s, err := b.js.Stream(ctx, "FILL")
				if err == nil {
					err = s.Purge(ctx)
				}
				return err
			},
		},
		{
			name:     "events stream at its max bytes",
			server:   func(*server.Options) {},
			opts:     provision.Options{EventsMaxBytes: 2 << 20},
			fill:     func(*backend) string { return names.IngestSubject("other", protocol.KindRaw) },
			wantCode: 10077,
			free: func(ctx context.Context, b *backend) error {
				return b.res.Events.Purge(ctx, jetstream.WithPurgeSubject(names.RunFilter("other")))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testenv.RunServerWith(t, tc.server)
			nc, js := testenv.Connect(t, s)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			opts := tc.opts
			opts.LeaseTTL = leaseTTL
			res, err := provision.Ensure(ctx, js, names, opts)
			if err != nil {
				t.Fatal(err)
			}
			b := &backend{nc: nc, js: js, res: res}
			subject := tc.fill(b)
			// Filled to the last byte: smaller and smaller messages until
			// even one byte is refused.
			for _, size := range []int{32 << 10, 1 << 10, 16, 1} {
				for i := 0; ; i++ {
					_, err := js.Publish(ctx, subject, bytes.Repeat([]byte("f"), size))
					var apiErr *jetstream.APIError
					if errors.As(err, &apiErr) && apiErr.ErrorCode == tc.wantCode {
						break
					}
					if err != nil || i > 10000 {
						t.Fatalf("filling %s with %d bytes, publish %d: %v; want error %d", subject, size, i, err, tc.wantCode)
					}
				}
			}

			// The run's output: JSON and raw lines, in batches and alone.
			var lines []follow.Line
			var jr bytes.Buffer
			for i := range 300 {
				l := fmt.Sprintf(`{"i":%d,"text":"%s"}`, i, strings.Repeat("x", i%50))
				if i%7 == 0 {
					l = fmt.Sprintf("raw line %d", i)
				}
				start := int64(jr.Len())
				jr.WriteString(l + "\n")
				lines = append(lines, follow.Line{Data: []byte(l), Start: start, End: int64(jr.Len())})
			}
			var mu sync.Mutex
			var full []bool
			c := publisher.NewChain(js, names, "run", 0, publisher.WithEpoch(1), publisher.WithOnStorageFull(func(f bool) {
				mu.Lock()
				full = append(full, f)
				mu.Unlock()
			}))
			states := func() []bool {
				mu.Lock()
				defer mu.Unlock()
				return append([]bool(nil), full...)
			}
			done := make(chan error, 1)
			go func() {
				for i := 0; i < len(lines); i += 50 {
					if err := c.PublishLines(ctx, lines[i:i+50]); err != nil {
						done <- err
						return
					}
				}
				done <- c.PublishStatus(ctx, protocol.Status{Status: protocol.StatusSucceeded, Offset: int64(jr.Len())})
			}()
			testenv.WaitFor(t, 10*time.Second, "the chain to wait for room", func() bool { return len(states()) > 0 })
			time.Sleep(500 * time.Millisecond)
			if got := c.LastSeq(); got != 0 {
				t.Fatalf("the chain's tip moved to %d while JetStream had no room", got)
			}
			select {
			case err := <-done:
				t.Fatalf("publishing gave up while JetStream had no room: %v", err)
			default:
			}
			if err := tc.free(ctx, b); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("publishing did not resume within 30s of space being freed")
			}
			if got := states(); len(got) != 2 || !got[0] || got[1] {
				t.Fatalf("storage-full reports %v, want one stall then its end", got)
			}

			ms := chain(t, b, "run")
			var got bytes.Buffer
			for i, m := range ms[:len(ms)-1] {
				subj := names.EventsSubject("run")
				if i%7 == 0 {
					subj = names.RawSubject("run")
				}
				if m.subject != subj || m.get(protocol.HeaderMsgID) != lineID("run", lines[i].End) {
					t.Fatalf("message %d: %s %s, want line %d on %s", i, m.subject, m.get(protocol.HeaderMsgID), i, subj)
				}
				got.Write(m.data)
				got.WriteByte('\n')
			}
			if !bytes.Equal(got.Bytes(), jr.Bytes()) || len(ms) != len(lines)+1 {
				t.Fatalf("the chain (%d messages, %d bytes) differs from the journal (%d lines, %d bytes)", len(ms), got.Len(), len(lines), jr.Len())
			}
			if st, err := protocol.ParseStatus(ms[len(ms)-1].data); err != nil || st.Status != protocol.StatusSucceeded {
				t.Fatalf("last message %q: %v", ms[len(ms)-1].data, err)
			}
		})
	}
}
