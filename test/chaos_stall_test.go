package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/protocol"
)

// dumpStall logs what each NATS server holds of a run whose reader got no
// terminal status: the server's own view of the events stream and of the
// consumers on it (its monitoring endpoint), the messages of the run each
// server answers a direct get with, the leader's per-subject count, and
// what fresh ordered consumers read. It tells a chain missing messages (on
// some servers or all) from a reader that stalls.
func dumpStall(t *testing.T, procs []*natsProc, js jetstream.JetStream, names protocol.Names, runID string, read int, journalPath string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "=== stall evidence for %s (the reader had %d messages)\n", runID, read)
	if j, err := os.ReadFile(journalPath); err == nil {
		fmt.Fprintf(&b, "journal %s: %d bytes, %d lines\n", journalPath, len(j), strings.Count(string(j), "\n"))
	}
	filter := names.RunFilter(runID)
	stream := names.EventsStream()
	for _, p := range procs {
		fmt.Fprintf(&b, "--- server %s (%s): %s\n", p.name, p.url(), p.jsz(stream, filter))
		fmt.Fprintf(&b, "its log on %s:\n%s\n", stream, lastMatching(p.log.Name(), stream, 12))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s, err := js.Stream(ctx, stream); err != nil {
		fmt.Fprintf(&b, "stream info: %v\n", err)
	} else if info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter)); err != nil {
		fmt.Fprintf(&b, "stream info: %v\n", err)
	} else {
		fmt.Fprintf(&b, "leader %s: state %+v subjects %v\n", info.Cluster.Leader, info.State.LastSeq, info.State.Subjects)
		for _, r := range info.Cluster.Replicas {
			fmt.Fprintf(&b, "  replica %s current=%v offline=%v lag=%d active=%v\n", r.Name, r.Current, r.Offline, r.Lag, r.Active)
		}
		// Direct gets, each server answering from its own replica (a queue
		// group member on the server the request arrives at is preferred).
		cfg := info.Config
		was := cfg.AllowDirect // true as provisioned (the read relay's), unless changed
		cfg.AllowDirect = true
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			fmt.Fprintf(&b, "enable direct get: %v\n", err)
		} else {
			time.Sleep(time.Second)
			for _, p := range procs {
				fmt.Fprintf(&b, "direct get via %s: %s\n", p.name, directScan(p.url(), stream, filter))
			}
			if !was {
				cfg.AllowDirect = false
				_, _ = js.UpdateStream(ctx, cfg)
			}
		}
	}
	for i := range 4 {
		fmt.Fprintf(&b, "fresh ordered consumer %d: %s\n", i, freshRead(js, stream, filter))
	}
	t.Log(b.String())
}

// healthz asks the server whether it is healthy: JetStream on, every
// stream and consumer it hosts current.
func (p *natsProc) healthz() error {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", p.mport))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}

// jsz is the server's own view of stream and of its consumers filtering on
// filter, from its monitoring endpoint.
func (p *natsProc) jsz(stream, filter string) string {
	if p.mport == 0 {
		return "no monitoring port"
	}
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz?accounts=true&streams=true&consumers=true&config=true", p.mport))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var jsz struct {
		Server  string `json:"server_name"`
		Account []struct {
			Streams []struct {
				Name    string          `json:"name"`
				Cluster json.RawMessage `json:"cluster"`
				State   struct {
					Msgs    uint64 `json:"messages"`
					FirstSq uint64 `json:"first_seq"`
					LastSeq uint64 `json:"last_seq"`
				} `json:"state"`
				Consumers []struct {
					Name   string `json:"name"`
					Config struct {
						Filter  string   `json:"filter_subject"`
						Filters []string `json:"filter_subjects"`
					} `json:"config"`
					Delivered  json.RawMessage `json:"delivered"`
					AckFloor   json.RawMessage `json:"ack_floor"`
					NumPending uint64          `json:"num_pending"`
					NumWaiting int             `json:"num_waiting"`
					Cluster    json.RawMessage `json:"cluster"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.Unmarshal(body, &jsz); err != nil {
		return fmt.Sprintf("jsz: %v", err)
	}
	var b strings.Builder
	for _, a := range jsz.Account {
		for _, s := range a.Streams {
			if s.Name != stream {
				continue
			}
			fmt.Fprintf(&b, "stream msgs=%d first=%d last=%d cluster=%s", s.State.Msgs, s.State.FirstSq, s.State.LastSeq, s.Cluster)
			for _, c := range s.Consumers {
				if c.Config.Filter != filter && !(len(c.Config.Filters) == 1 && c.Config.Filters[0] == filter) {
					continue
				}
				fmt.Fprintf(&b, "\n    consumer %s delivered=%s pending=%d waiting=%d cluster=%s", c.Name, c.Delivered, c.NumPending, c.NumWaiting, c.Cluster)
			}
		}
	}
	if b.Len() == 0 {
		return "no " + stream + " on " + jsz.Server
	}
	return b.String()
}

// directScan reads the run's messages with direct gets sent to the server
// at url only, and summarises them.
func directScan(url, stream, filter string) string {
	nc, err := nats.Connect(url, nats.NoReconnect(), nats.Timeout(2*time.Second))
	if err != nil {
		return err.Error()
	}
	defer nc.Close()
	var n int
	var last uint64
	var lastSubj, lastStatus string
	for seq := uint64(1); ; {
		req, _ := json.Marshal(map[string]any{"seq": seq, "next_by_subj": filter})
		m, err := nc.Request("$JS.API.DIRECT.GET."+stream, req, 2*time.Second)
		if err != nil {
			return fmt.Sprintf("%d messages, last seq %d (%s %s), then: %v", n, last, lastSubj, lastStatus, err)
		}
		if st := m.Header.Get("Status"); st != "" {
			return fmt.Sprintf("%d messages, last seq %d (%s %s), then status %s %s", n, last, lastSubj, lastStatus, st, m.Header.Get("Description"))
		}
		n++
		last, _ = strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		lastSubj = m.Header.Get("Nats-Subject")
		if strings.HasSuffix(lastSubj, ".status") {
			lastStatus = string(m.Data)
		}
		seq = last + 1
	}
}

// freshRead reads the run from its start with a new ordered consumer and
// summarises what it got and where the consumer was placed.
func freshRead(js jetstream.JetStream, stream, filter string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, MaxResetAttempts: 3})
	if err != nil {
		return err.Error()
	}
	it, err := c.Messages()
	if err != nil {
		return err.Error()
	}
	defer it.Stop()
	var n int
	var last uint64
	var where string
	for {
		start := time.Now()
		m, err := it.Next(jetstream.NextMaxWait(3 * time.Second))
		if info := c.CachedInfo(); info != nil && info.Cluster != nil {
			where = info.Cluster.Leader
		}
		if err != nil {
			return fmt.Sprintf("on %s: %d messages, last seq %d, then after %v: %v", where, n, last, time.Since(start).Round(time.Millisecond), err)
		}
		n++
		md, _ := m.Metadata()
		last = md.Sequence.Stream
	}
}

// lastMatching returns the last n lines of the file at path that hold s.
func lastMatching(path, s string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, s) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}
