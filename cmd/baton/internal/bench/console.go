package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/internal/provision"
	"github.com/batonhq/baton/protocol"
)

const consoleTarget = "live view ≥ 0.90 × a plain NATS subscription of the same run, lines/s; list of 10,000 runs"

// consolePrefix keeps the list's 10,000 records apart from other rows'.
const consolePrefix = "cons"

// consoleToken is the bench console's token (it serves loopback only).
const consoleToken = "bench"

// console: one run whose fake agent writes as fast as it can, read at
// once by a plain NATS subscription of its subjects (the anchor) and by
// the console's live view (its server-sent events, as a browser reads
// them); lines/s of each from its first line to its last. Then the runs
// list with 10,000 records: the first page, the last page, a filter and a
// runId search, each the median of 21 requests.
func (e *env) console(ctx context.Context, sz sizes) []Result {
	fail := func(err error) []Result { return failed("console", consoleTarget, err) }
	if _, err := e.startWorker(ctx, "console", 4); err != nil {
		return fail(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := console.New(cctx, e.js, e.names, console.WithToken(consoleToken))
	if err != nil {
		return fail(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()

	runID := "bench-console"
	var (
		mu          sync.Mutex
		n           int
		first, last time.Time
	)
	term := newTerminal()
	sub, err := e.subscribe(e.names.RunFilter(runID), func(m runMsg) {
		term.see(m)
		if m.kind == protocol.KindStatus {
			return
		}
		mu.Lock()
		if n == 0 {
			first = m.at
		}
		n++
		last = m.at
		mu.Unlock()
	})
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe()
	view := make(chan sseRate, 1)
	resp, err := consoleGet(cctx, srv.URL+"/api/runs/"+runID+"/events")
	if err != nil {
		return fail(err)
	}
	go func() { view <- readSSE(resp) }()

	job := protocol.Job{RunID: runID, Profile: "fake",
		Args: []string{"--lines", strconv.Itoa(sz.pipelineLines), "--line-size", strconv.Itoa(pipelineLineSize)}}
	if err := e.client.Submit(ctx, job); err != nil {
		return fail(err)
	}
	statuses, err := e.waitRuns(ctx, term, []string{runID}, 5*time.Minute)
	if err != nil {
		return fail(err)
	}
	if st := statuses[runID]; st.Status != protocol.StatusSucceeded {
		return fail(fmt.Errorf("run ended %s: %s", st.Status, st.Reason))
	}
	var v sseRate
	select {
	case v = <-view:
	case <-time.After(2 * time.Minute):
		return fail(errors.New("the live view did not end within 2 min of the run"))
	}
	if v.err != nil {
		return fail(fmt.Errorf("live view: %w", v.err))
	}
	mu.Lock()
	subN, subRate := n, float64(n-1)/last.Sub(first).Seconds()
	mu.Unlock()
	if v.lines != subN {
		return fail(fmt.Errorf("the live view got %d lines, the subscription %d", v.lines, subN))
	}
	ratio := v.rate / subRate
	e.logf("console: live view %.0f lines/s, NATS subscription %.0f lines/s (%d lines)", v.rate, subRate, subN)

	list, err := e.consoleList(ctx)
	if err != nil {
		return fail(err)
	}
	return []Result{{
		Row: "console", Target: consoleTarget,
		Measured: fmt.Sprintf("live view %.0f lines/s vs NATS subscription %.0f lines/s = %.2f (%d lines of %d B, one run at full speed); list of 10,000 runs: %s",
			v.rate, subRate, ratio, subN, pipelineLineSize, list),
		Pass: verdict(ratio >= 0.9),
	}}
}

func consoleGet(ctx context.Context, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return resp, nil
}

type sseRate struct {
	lines int
	rate  float64
	err   error
}

// readSSE reads a run's live view to its end event, decoding every event
// as a browser would, and times its lines.
func readSSE(resp *http.Response) sseRate {
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var (
		n           int
		first, last time.Time
		ev          struct {
			Kind string `json:"kind"`
			Data string `json:"data"`
		}
	)
	named := false // a named event's data is not a line of the run ("watching")
	for sc.Scan() {
		line := sc.Text()
		if line == "event: end" {
			if n < 2 {
				return sseRate{err: fmt.Errorf("%d lines", n)}
			}
			return sseRate{lines: n, rate: float64(n-1) / last.Sub(first).Seconds()}
		}
		if line == "" || strings.HasPrefix(line, "event: ") {
			named = line != ""
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || named {
			continue
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return sseRate{err: err}
		}
		if ev.Kind == string(protocol.KindStatus) {
			continue
		}
		at := time.Now()
		if n == 0 {
			first = at
		}
		n++
		last = at
	}
	return sseRate{err: fmt.Errorf("stream ended without its end event after %d lines: %v", n, sc.Err())}
}

// consoleList times the runs list over 10,000 records.
func (e *env) consoleList(ctx context.Context) (string, error) {
	names := protocol.MustNames(consolePrefix)
	if _, err := provision.Ensure(ctx, e.js, names, provision.Options{Replicas: 1}); err != nil {
		return "", err
	}
	const records = 10_000
	if err := e.fillRecords(ctx, names, records); err != nil {
		return "", err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := console.New(cctx, e.js, names, console.WithToken(consoleToken))
	if err != nil {
		return "", err
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	var pg struct{ All, Total int }
	get := func(q string) (time.Duration, error) {
		t0 := time.Now()
		resp, err := consoleGet(ctx, srv.URL+"/api/runs?"+q)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&pg); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	loaded := time.Now()
	for pg.All < records {
		if time.Since(loaded) > time.Minute {
			return "", fmt.Errorf("the console's index holds %d of %d records after a minute", pg.All, records)
		}
		if _, err := get("limit=1"); err != nil {
			return "", err
		}
		time.Sleep(20 * time.Millisecond)
	}
	indexed := time.Since(loaded)
	var parts []string
	for _, q := range []struct{ label, query string }{
		{"first page", "limit=50"},
		{"last page", "limit=50&offset=9950"},
		{"filter", "limit=50&state=succeeded&label=repo%3Dbatonhq%2Fbaton"},
		{"search", "limit=50&q=history-00042"},
	} {
		var ds []time.Duration
		for range 21 {
			d, err := get(q.query)
			if err != nil {
				return "", err
			}
			ds = append(ds, d)
		}
		parts = append(parts, q.label+" "+ms(median(ds)))
	}
	return fmt.Sprintf("indexed in %s; %s", ms(indexed), strings.Join(parts, ", ")), nil
}
