package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/batonhq/baton/client"
)

// sse writes server-sent events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) (*sse, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold events back
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sse{w: w, f: f}, true
}

// event writes one event; data must hold no newline (JSON does not).
func (s *sse) event(id, name string, data []byte) error {
	buf := make([]byte, 0, len(data)+48)
	if id != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, id...)
		buf = append(buf, '\n')
	}
	if name != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, name...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	_, err := s.w.Write(buf)
	return err
}

func (s *sse) comment(c string) error {
	if _, err := s.w.Write([]byte(": " + c + "\n\n")); err != nil {
		return err
	}
	s.flush()
	return nil
}

func (s *sse) flush() { s.f.Flush() }

// wireEvent is one message of a run's chain as the browser gets it.
type wireEvent struct {
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	Offset int64  `json:"offset"`
	Data   string `json:"data"`
	// On an input: the agent's stdin closed after it, or it is an
	// interrupt.
	EOF       bool `json:"eof,omitempty"`
	Interrupt bool `json:"interrupt,omitempty"`
	// Approval is the approval id of a prompt line, or of a decision or
	// follow-up input, of a run with a policy: the page reads the run's
	// approvals again.
	Approval string `json:"approval,omitempty"`
}

// serveEvents streams the chain of a run as server-sent events, each with
// its stream sequence as id: from the first message, or from just after
// the Last-Event-ID an EventSource sends when it reconnects (or ?after=),
// so a reconnect neither misses nor repeats a line. client.Watch reads the
// chain through the workers' read relay and fills any gap from it.
// After the terminal status an "end" event closes the stream; a "failure"
// event says why one ended before it. A "workers" event, {"answering":
// false}, says that no worker answers the watch's reads (it waits for
// one), and {"answering": true} that one does again.
func (c *Console) serveEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	var opts []client.WatchOption
	if after != "" {
		seq, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, errors.New("after (or Last-Event-ID): want a stream sequence"))
			return
		}
		opts = append(opts, client.FromSequence(seq+1))
	}
	s, ok := newSSE(w)
	if !ok {
		return
	}
	// The page reconnects after a failure: while NATS cannot be reached
	// it is told so at once (and a stream open when NATS goes away ends
	// so, below), and once NATS is back that the stream is on again
	// ("watching"), so it stops showing the failure.
	if down := c.natsDown(); down != nil {
		s.failure(down)
		return
	}
	_ = s.event("", "watching", []byte("{}"))
	s.flush()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The watch hands events to the writer through a channel, and the
	// writer flushes once the channel is empty: one flush per burst, not
	// per line, so a fast run costs few writes.
	events := make(chan client.Event, 512)
	done := make(chan error, 1)
	// Whether a worker answers the watch's reads (none runs, or the only
	// one crashed): the page says so, where it went silent.
	workers := make(chan bool, 1)
	opts = append(opts, client.OnWorkers(func(answering bool) {
		select {
		case <-workers: // an older state not written yet: this one replaces it
		default:
		}
		workers <- answering
	}))
	go func() {
		_, err := c.client.Watch(ctx, id, func(ev client.Event) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, opts...)
		done <- err
		close(events)
	}()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	// The watch would wait out an outage silently: the stream ends with
	// the outage instead, so the page says so, and resumes once NATS is
	// back from what it showed.
	up := time.NewTicker(500 * time.Millisecond)
	defer up.Stop()
	for {
		select {
		case <-ping.C:
			if s.comment("ping") != nil {
				return
			}
		case <-up.C:
			if down := c.natsDown(); down != nil {
				s.failure(down)
				return
			}
		case answering := <-workers:
			if down := c.natsDown(); down != nil {
				s.failure(down) // no worker answers as NATS is gone: say that
				return
			}
			b, _ := json.Marshal(map[string]bool{"answering": answering})
			if s.event("", "workers", b) != nil {
				return
			}
			s.flush()
		case ev, open := <-events:
			if !open {
				if err := <-done; err != nil {
					if ctx.Err() == nil {
						if down := c.natsDown(); down != nil {
							err = down
						}
						s.failure(err)
					}
					return
				}
				_ = s.event("", "end", []byte("{}"))
				s.flush()
				return
			}
			if err := s.writeEvent(ev); err != nil {
				return
			}
			// Drain what else is ready, then flush once.
		drain:
			for {
				select {
				case ev, open := <-events:
					if !open { // the outer loop sees it closed again
						break drain
					}
					if err := s.writeEvent(ev); err != nil {
						return
					}
				default:
					break drain
				}
			}
			s.flush()
		}
	}
}

// failure tells the page why its stream ends short of the run's end.
func (s *sse) failure(err error) {
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	_ = s.event("", "failure", b)
	s.flush()
}

func (s *sse) writeEvent(ev client.Event) error {
	b, err := json.Marshal(wireEvent{Seq: ev.Seq, Kind: string(ev.Kind), Offset: ev.Offset, Data: string(ev.Data), EOF: ev.EOF, Interrupt: ev.Interrupt, Approval: ev.Approval})
	if err != nil {
		return err
	}
	return s.event(strconv.FormatUint(ev.Seq, 10), "", b)
}
