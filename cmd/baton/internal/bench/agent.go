package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// AgentOptions configure the stamping agent.
type AgentOptions struct {
	// Rate is lines per second; 0 writes as fast as the reader takes them.
	Rate float64
	// Lines is how many lines to write; with Duration set, the agent
	// writes until Duration has passed instead.
	Lines    int
	Duration time.Duration
	// Size is each line's length in bytes, newline included (at least
	// MinStampSize; shorter asks are raised to it).
	Size int
}

// stampPrefix starts every line of the stamping agent; ParseStamp reads it.
const stampPrefix = `{"type":"bench","seq":`

// MinStampSize is the shortest stamped line: the frame with the largest
// numbers and an empty pad.
var MinStampSize = len(stampPrefix) + len(`18446744073709551615,"t":9223372036854775807,"pad":""}`) + 1

// ErrAgentOptions: options the agent cannot honour.
var ErrAgentOptions = errors.New("bench: invalid agent options")

// Agent writes stamped NDJSON lines to w, each in one write:
//
//	{"type":"bench","seq":1,"t":1764430000123456789,"pad":"xxxx…"}
//
// where t is the wall-clock time (Unix nanoseconds) taken just before the
// write. A reader on the same host subtracts it from the time it got the
// line: that is the latency from the agent's write, through the pipe, the
// runner's journal append, the worker and NATS, to the reader; a bound on
// append-to-reader latency (the pipe hop before the append is included).
// The schedule is absolute (line n at start + n/Rate), so a late write
// does not shift the rest.
func Agent(ctx context.Context, w io.Writer, o AgentOptions) error {
	if o.Rate < 0 || o.Lines < 0 || o.Duration < 0 || (o.Lines == 0 && o.Duration == 0) {
		return fmt.Errorf("%w: rate %v, lines %d, duration %v", ErrAgentOptions, o.Rate, o.Lines, o.Duration)
	}
	if o.Duration > 0 && o.Rate == 0 {
		return fmt.Errorf("%w: a duration needs a rate", ErrAgentOptions)
	}
	size := max(o.Size, MinStampSize)
	buf := make([]byte, 0, size)
	start := time.Now()
	for seq := uint64(1); ; seq++ {
		if o.Duration > 0 {
			if time.Since(start) >= o.Duration {
				return nil
			}
		} else if seq > uint64(o.Lines) {
			return nil
		}
		if o.Rate > 0 {
			at := start.Add(time.Duration(float64(seq-1) / o.Rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		buf = appendStamp(buf[:0], seq, time.Now().UnixNano(), size)
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("bench: agent write: %w", err)
		}
	}
}

// appendStamp appends one stamped line of size bytes (newline included).
func appendStamp(b []byte, seq uint64, t int64, size int) []byte {
	b = append(b, stampPrefix...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, t, 10)
	b = append(b, `,"pad":"`...)
	for len(b) < size-3 {
		b = append(b, 'x')
	}
	return append(b, "\"}\n"...)
}

// ParseStamp reads the sequence number and write time of a stamped line
// (without its newline). ok is false for any other line.
func ParseStamp(line []byte) (seq uint64, t int64, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(stampPrefix))
	if !found {
		return 0, 0, false
	}
	i := bytes.IndexByte(rest, ',')
	if i <= 0 {
		return 0, 0, false
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	if err != nil || seq == 0 {
		return 0, 0, false
	}
	rest, found = bytes.CutPrefix(rest[i:], []byte(`,"t":`))
	if !found {
		return 0, 0, false
	}
	i = bytes.IndexByte(rest, ',')
	if i <= 0 {
		return 0, 0, false
	}
	t, err = strconv.ParseInt(string(rest[:i]), 10, 64)
	if err != nil || t <= 0 {
		return 0, 0, false
	}
	return seq, t, true
}
