package publisher_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/batonhq/baton/internal/testenv"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/publisher"
)

// The publisher's ceiling against the server's, without a worker, a
// journal or a subscriber (`baton bench` measures the whole pipeline):
//
//	go test ./publisher -run XXX -bench . -benchtime 100000x
//
// Each reports lines (or messages) per second; compare PublishLines with
// Async of the same deployment.

// agentLine is a typical agent line (a Claude Code text delta), 205 bytes.
var agentLine = []byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore"}}}`)

func benchBackends(b *testing.B, fn func(*testing.B, *backend)) {
	for _, d := range []struct {
		name string
		up   func(testing.TB) *backend
	}{
		{"R1", func(t testing.TB) *backend {
			s := testenv.RunServer(t)
			nc, js := testenv.Connect(t, s)
			return provisionedTB(t, nc, js, 1)
		}},
		{"R3", func(t testing.TB) *backend {
			servers := testenv.RunCluster(t, 3)
			nc, js := testenv.ConnectCluster(t, servers)
			return provisionedTB(t, nc, js, 3)
		}},
	} {
		b.Run(d.name, func(b *testing.B) { fn(b, d.up(b)) })
	}
}

// BenchmarkPublishLines: fenced batches of a run's backlog: atomic, and
// fast after the chain's own status (WithFastBatches; a replicated stream
// refuses them and the chain falls back to atomic batches).
func BenchmarkPublishLines(b *testing.B) {
	benchBackends(b, func(b *testing.B, be *backend) {
		for _, fast := range []bool{false, true} {
			for _, size := range []int{100, 512, 1000} {
				b.Run(fmt.Sprintf("fast=%t/batch=%d", fast, size), func(b *testing.B) {
					c := publisher.NewChain(be.js, names, fmt.Sprintf("bench-%t-%d", fast, size), 0, publisher.WithEpoch(1), publisher.WithFastBatches(fast))
					if err := c.PublishStatus(context.Background(), protocol.Status{Status: protocol.StatusStarted}); err != nil {
						b.Fatal(err)
					}
					lines := make([]follow.Line, 0, size)
					var end int64
					flush := func() {
						if err := c.PublishLines(context.Background(), lines); err != nil {
							b.Fatal(err)
						}
						lines = lines[:0]
					}
					for b.Loop() {
						end += int64(len(agentLine) + 1)
						if lines = append(lines, follow.Line{Data: agentLine, End: end}); len(lines) == size {
							flush()
						}
					}
					if len(lines) > 0 {
						flush()
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
				})
			}
		}
	})
}

// BenchmarkPublishLine: one fenced publish per line (lines that come one
// at a time).
func BenchmarkPublishLine(b *testing.B) {
	benchBackends(b, func(b *testing.B, be *backend) {
		c := publisher.NewChain(be.js, names, "bench-single", 0, publisher.WithEpoch(1))
		var end int64
		b.ReportAllocs()
		for b.Loop() {
			end += int64(len(agentLine) + 1)
			if err := c.PublishLine(context.Background(), agentLine, end); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	})
}

// BenchmarkAsync: the anchor, unfenced JetStream async publish (4,000 in
// flight) of the same lines to the same stream.
func BenchmarkAsync(b *testing.B) {
	benchBackends(b, func(b *testing.B, be *backend) {
		subject := names.IngestSubject("bench-async", protocol.KindRaw)
		for b.Loop() {
			if _, err := be.js.PublishAsync(subject, agentLine); err != nil {
				b.Fatal(err)
			}
		}
		<-be.js.PublishAsyncComplete()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}
