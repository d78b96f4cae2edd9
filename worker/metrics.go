package worker

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the worker's Prometheus series. Every series is per worker
// process; a fleet is summed by the scraper.
type metrics struct {
	runsStarted prometheus.Counter
	// Sandboxes started ahead of their jobs, by profile, and the runs
	// that took one.
	prestarted     *prometheus.CounterVec
	poolWaiting    *prometheus.GaugeVec
	runsPrestarted prometheus.Counter
	inputsWritten  prometheus.Counter
	runsAttached   *prometheus.CounterVec // by reason: handoff, recover
	runsFinished   *prometheus.CounterVec // by terminal status
	runsHandedOff  prometheus.Counter
	runsDropped    *prometheus.CounterVec // runs this worker stopped publishing, by cause
	runsPruned     prometheus.Counter
	linesOut       prometheus.Counter
	bytesOut       prometheus.Counter
	rejected       *prometheus.CounterVec // jobs sent to the DLQ, by reason
	dropped        *prometheus.CounterVec // jobs terminated, their rejection refused by the DLQ, by reason
	heldForDisk    prometheus.Counter     // jobs the disk budget left in the stream
	active         prometheus.GaugeFunc
	reapPasses     prometheus.Histogram // node-loss reaper passes that read the index
	// Runs whose publishing waits for room in JetStream, and such stalls.
	storageWaiting prometheus.Gauge
	storageStalls  prometheus.Counter
	// Requests the micro service refused for their reply subject, by
	// endpoint and reason (service.go).
	requestsRefused *prometheus.CounterVec
	// Stops of a runner given up with the runner alive, by kind (cancel,
	// idle, lost), and agents of runs declared lost stopped (stop.go).
	stopsAbandoned *prometheus.CounterVec
	lostStopped    prometheus.Counter
	// Permission prompts of runs with a policy, by verdict, and those
	// that wait on a person now, in runs held here (approvals.go).
	approvals        *prometheus.CounterVec
	approvalsPending prometheus.Gauge
	// Gaps between this worker's successive node heartbeats (beats.go).
	heartbeatGaps prometheus.Histogram
	// Host tool calls this worker asked, by outcome, and how long each
	// service took (tools.go).
	toolCalls    *prometheus.CounterVec
	toolDuration prometheus.Histogram
	// The usage of the runs this worker ended (usage.go).
	usage *usageMetrics
}

func newMetrics(reg prometheus.Registerer, w *Worker) *metrics {
	m := &metrics{
		runsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_runs_started_total", Help: "Runs this worker started."}),
		prestarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_sandboxes_prestarted_total", Help: "Sandboxes this worker started ahead of their jobs (profile pool), by profile."}, []string{"profile"}),
		poolWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: poolWaitingMetric, Help: "Prestarted sandboxes this worker holds ready for a run now, by profile: a run of the profile that fits takes one."}, []string{"profile"}),
		runsPrestarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_runs_started_prestarted_total", Help: "Runs this worker started on a prestarted sandbox (of baton_runs_started_total)."}),
		inputsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_inputs_written_total", Help: "Input messages this worker handed to runners, which wrote them to agents' stdin."}),
		runsAttached: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_runs_attached_total", Help: "Runs this worker took over, by attach reason."}, []string{"reason"}),
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_runs_finished_total", Help: "Terminal statuses this worker published, by status."}, []string{"status"}),
		runsHandedOff: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_runs_handed_off_total", Help: "Runs this worker handed off while stopping."}),
		runsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_runs_dropped_total", Help: "Runs this worker stopped publishing without finishing or handing them off (lease lost, fenced, errors); their node's recovery re-attaches them."}, []string{"cause"}),
		runsPruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_runs_pruned_total", Help: "Finished run directories this worker removed past the run retention."}),
		linesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_lines_published_total", Help: "Journal lines published on run chains."}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_line_bytes_published_total", Help: "Bytes of journal lines published on run chains."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_jobs_rejected_total", Help: "Jobs moved to the DLQ, by reason."}, []string{"reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_jobs_dropped_total", Help: "Jobs terminated on the jobs stream because the DLQ refused their rejection every time, by reason (the log has each one's size and digest)."}, []string{"reason"}),
		heldForDisk: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_jobs_held_for_disk_total", Help: "Jobs left in the stream because the state filesystem had no room for them beside what running runs may still write and diskReserve (the disk budget)."}),
		active: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "baton_runs_active", Help: "Runs this worker holds now."}, func() float64 { return float64(w.activeCount()) }),
		reapPasses: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "baton_reaper_pass_seconds", Help: "Node-loss reaper passes that read the node index, by duration.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		storageWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baton_runs_waiting_for_storage", Help: "Runs whose publishing waits for room in JetStream (store or events stream full); nothing is lost, it resumes when space returns."}),
		storageStalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_storage_stalls_total", Help: "Times a run's publishing began waiting for room in JetStream."}),
		requestsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_requests_refused_total", Help: "Requests to this worker's micro service dropped unanswered because their reply subject is not the requester's inbox, by endpoint and reason."}, []string{"endpoint", "reason"}),
		stopsAbandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_stops_abandoned_total", Help: "Stops of a runner (cancel, idle, lost) this worker gave up on while the runner stayed alive past their bound; the log says why."}, []string{"kind"}),
		lostStopped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_lost_agents_stopped_total", Help: "Agents this worker stopped because their run was declared lost while its node was away (slow restart, partition, overload); their runs' directories say so in lost-stopped."}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_approvals_total", Help: "Permission prompts of runs with a policy this worker recorded, by the policy's verdict: allow, ask (a person's answer awaited), deny."}, []string{"verdict"}),
		approvalsPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baton_approvals_pending", Help: "Permission prompts whose agent waits on a person's answer now (not yet held by askTimeout), in runs this worker holds."}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_tool_calls_total", Help: "Host tool calls this worker asked of their services, by outcome: ok, error (the service's), no_service, timeout, abandoned (handed to a successor)."}, []string{"outcome"}),
		toolDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "baton_tool_call_seconds", Help: "Time from a host tool request to its service's answer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}),
		heartbeatGaps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "baton_heartbeat_gap_seconds", Help: "Time between this worker's successive node heartbeats (planned: leaseTTL/3); leaseTTL should be at least twice the longest (docs/operations.md).",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 12)}),
		usage: newUsageMetrics(),
	}
	if reg != nil {
		reg.MustRegister(m.usage.collectors()...)
		reg.MustRegister(m.runsStarted, m.prestarted, m.poolWaiting, m.runsPrestarted, m.inputsWritten, m.runsAttached, m.runsFinished, m.runsHandedOff, m.runsDropped,
			m.runsPruned, m.linesOut, m.bytesOut, m.rejected, m.dropped, m.heldForDisk, m.active, m.reapPasses, m.storageWaiting, m.storageStalls, m.requestsRefused,
			m.stopsAbandoned, m.lostStopped, m.heartbeatGaps, m.toolCalls, m.toolDuration, m.approvals, m.approvalsPending)
	}
	return m
}

func (w *Worker) activeCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.active)
}

const poolWaitingMetric = "baton_sandboxes_waiting"

// PoolWaiting reads from g, the registry of a worker's metrics
// (WithMetrics), how many prestarted sandboxes the worker holds ready for
// a run now, by profile: those a run would take. A sandbox's own records
// say it waits a little before its worker has it in hand.
func PoolWaiting(g prometheus.Gatherer) (map[string]int, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, f := range families {
		if f.GetName() != poolWaitingMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "profile" {
					out[l.GetValue()] = int(m.GetGauge().GetValue())
				}
			}
		}
	}
	return out, nil
}
