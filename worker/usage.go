package worker

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/batonhq/baton/agui"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/journal/follow"
	"github.com/batonhq/baton/protocol"
)

// errTallied stops a journal's read at the end of what its tally counts.
var errTallied = errors.New("usage counted")

// sentinelUsage is the usage the runner's sentinel reports: the agent's
// CPU time and peak memory.
func sentinelUsage(s journal.Sentinel) *protocol.Usage {
	user, sys := float64(s.CPUUserUsec)/1e6, float64(s.CPUSystemUsec)/1e6
	return &protocol.Usage{CPUSeconds: user + sys, CPUUserSeconds: user, CPUSystemSeconds: sys, MaxRSSBytes: s.MaxRSS}
}

// usage is the usage of a run that ends with st: what its sentinel
// reported (from, if anything), what its journal holds and what its end
// stored. It counts the journal from its start, not what this worker
// published: a run handed off or taken over after a crash, any number of
// times, has the same usage as one that never was.
func (r *run) usage(st protocol.Status, from *protocol.Usage) *protocol.Usage {
	u := protocol.Usage{}
	if from != nil {
		u = *from
	}
	if !r.rec.CreatedAt.IsZero() {
		u.WallSeconds = time.Since(r.rec.CreatedAt).Seconds()
	}
	if err := r.tally(&u); err != nil {
		r.log.Warn().Err(err).Msg("count the run's usage from its journal; its usage counts the lines read")
	}
	for _, o := range st.Outputs {
		u.OutputsBytes += int64(o.Size)
	}
	if st.Checkpoint != nil {
		u.CheckpointBytes = int64(st.Checkpoint.Size)
	}
	return &u
}

// tally adds to u what r's journal holds up to the position reached
// (r.offset, the sentinel's start once it is read): the agent's lines and
// their bytes, what it reported of its model use, the inputs written to
// it and its egress. One read of the journal at the run's end: the
// publish path pays nothing for it.
func (r *run) tally(u *protocol.Usage) error {
	if r.offset <= 0 {
		return nil
	}
	sentinel, _ := journal.NewSentinelMatcher(r.nonce)
	meter := agui.NewUsageMeter(agui.Dialect(r.rec.Events))
	defer func() { u.Agent = meter.Usage() }()
	_, err := follow.ReadLines(r.dir.Journal(), 0, func(l follow.Line) error {
		if l.End > r.offset {
			return errTallied
		}
		if l.Data != nil {
			if _, ok := sentinel.Match(l.Data); ok {
				return errTallied
			}
			if _, ok := journal.ParseInputRecord(l.Data, r.nonce); ok {
				u.Inputs++
				return nil
			}
			if rec, ok := journal.ParseEgressRecord(l.Data, r.nonce); ok {
				u.EgressBytes += rec.Egress.BytesIn + rec.Egress.BytesOut
				return nil
			}
			if _, ok := journal.ParseToolRecord(l.Data, r.nonce); ok {
				return nil
			}
			meter.Observe(l.Data)
		}
		u.Lines++
		u.StdoutBytes += l.End - l.Start
		return nil
	})
	if errors.Is(err, errTallied) {
		return nil
	}
	return err
}

// usageMetrics are the usage of the runs this worker ended, by profile: a
// fleet's bill per profile is their sum over its workers.
type usageMetrics struct {
	wall, cpu, stdout, egress, outputs, cost *prometheus.CounterVec
	tokens                                   *prometheus.CounterVec // by profile and kind
	// keyWall, keyCPU and keyCost are by concurrency key: the keys the
	// configuration names (keyConcurrency.keys, keyWeights), every other
	// key as "other", so the series are as many as the file's keys.
	keyWall, keyCPU, keyCost *prometheus.CounterVec
}

func newUsageMetrics() *usageMetrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"profile"})
	}
	return &usageMetrics{
		wall:    counter("baton_usage_wall_seconds_total", "Wall time of the runs this worker ended, by profile."),
		cpu:     counter("baton_usage_cpu_seconds_total", "CPU time (user and system) of the agents of the runs this worker ended, by profile."),
		stdout:  counter("baton_usage_stdout_bytes_total", "Bytes the agents of the runs this worker ended printed, by profile."),
		egress:  counter("baton_usage_egress_bytes_total", "Bytes the agents of the runs this worker ended sent and received through the egress proxy, by profile."),
		outputs: counter("baton_usage_stored_bytes_total", "Bytes of outputs and checkpoints the runs this worker ended stored, by profile."),
		cost:    counter("baton_usage_cost_usd_total", "Cost in US dollars the agents of the runs this worker ended reported (their own estimate), by profile."),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_usage_agent_tokens_total",
			Help: "Model tokens the agents of the runs this worker ended reported, by profile and kind: input (read without the cache), output, cache."}, []string{"profile", "kind"}),
		keyWall: byKey("baton_usage_key_wall_seconds_total", "Wall time of the keyed runs this worker ended, by concurrency key (the keys the configuration names; any other: other)."),
		keyCPU:  byKey("baton_usage_key_cpu_seconds_total", "CPU time of the agents of the keyed runs this worker ended, by concurrency key (the keys the configuration names; any other: other)."),
		keyCost: byKey("baton_usage_key_cost_usd_total", "Cost in US dollars the agents of the keyed runs this worker ended reported, by concurrency key (the keys the configuration names; any other: other)."),
	}
}

func byKey(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"key"})
}

// keyLabel is key's label in the by-key metrics: the key when the
// configuration names it, else "other"; "" for a run of no key.
func keyLabel(ten config.Tenancy, key string) string {
	if key == "" {
		return ""
	}
	if _, ok := ten.KeyConcurrency.Keys[key]; ok {
		return key
	}
	if _, ok := ten.KeyWeights[key]; ok {
		return key
	}
	return "other"
}

func (m *usageMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.wall, m.cpu, m.stdout, m.egress, m.outputs, m.cost, m.tokens, m.keyWall, m.keyCPU, m.keyCost}
}

// observe counts the usage of a run of profile that this worker ended,
// and of its key (keyLabel; "" for none).
func (m *usageMetrics) observe(profile, key string, u *protocol.Usage) {
	if u == nil {
		return
	}
	if key != "" {
		m.keyWall.WithLabelValues(key).Add(u.WallSeconds)
		m.keyCPU.WithLabelValues(key).Add(u.CPUSeconds)
		m.keyCost.WithLabelValues(key).Add(u.Agent.CostUSD)
	}
	m.wall.WithLabelValues(profile).Add(u.WallSeconds)
	m.cpu.WithLabelValues(profile).Add(u.CPUSeconds)
	m.stdout.WithLabelValues(profile).Add(float64(u.StdoutBytes))
	m.egress.WithLabelValues(profile).Add(float64(u.EgressBytes))
	m.outputs.WithLabelValues(profile).Add(float64(u.OutputsBytes + u.CheckpointBytes))
	m.cost.WithLabelValues(profile).Add(u.Agent.CostUSD)
	m.tokens.WithLabelValues(profile, "input").Add(float64(u.Agent.InputTokens))
	m.tokens.WithLabelValues(profile, "output").Add(float64(u.Agent.OutputTokens))
	m.tokens.WithLabelValues(profile, "cache").Add(float64(u.Agent.CacheTokens))
}
