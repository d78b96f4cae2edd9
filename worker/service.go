package worker

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/protocol"
)

// serve registers the micro service, which stops when ctx ends. Its "status" endpoint,
// on <prefix>.worker.<id>.status, answers with protocol.WorkerStatus; its "cancel"
// endpoint, on <prefix>.control.cancel.<runId>, records cancel intents.
//
// The service lives on the service connection (WithServiceConn), so
// every answer, micro's own $SRV.PING/INFO/STATS included, is published
// with that connection's rights; the handlers do their work (records,
// input, notices) on the main one. Every endpoint is guarded (answerable):
// a request whose reply subject is not the requester's own inbox gets no
// action and no answer.
func (w *Worker) serve(ctx context.Context) (stop func() error, err error) {
	if w.svc == nil {
		w.svc = w.nc
		w.log.Warn().Msg("the micro service answers on the main connection: only the in-process check of reply subjects guards its answers (give the worker its service user's credentials)")
	}
	svc, err := micro.AddService(w.svc, micro.Config{
		Name:        protocol.WorkerService,
		Version:     Version,
		Description: "baton worker: durable sandboxed agent runs",
		Metadata:    map[string]string{"node": w.node, "worker": w.id},
	})
	if err != nil {
		return nil, err
	}
	g := svc.AddGroup(w.names.WorkerSubject(w.id))
	if err := g.AddEndpoint("status", w.answerable("status", false, micro.HandlerFunc(func(req micro.Request) {
		b, _ := json.Marshal(w.statusInfo())
		_ = req.Respond(b)
	}))); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// Every worker answers cancel requests, one of them each (micro's
	// queue group): see handleCancel.
	if err := svc.AddEndpoint("cancel", w.answerable("cancel", true, micro.ContextHandler(ctx, w.handleCancel)),
		micro.WithEndpointSubject(w.names.CancelRequests())); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// And input requests, likewise: see handleInput.
	if err := svc.AddEndpoint("input", w.answerable("input", true, micro.ContextHandler(ctx, w.handleInput)),
		micro.WithEndpointSubject(w.names.InputRequests())); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	if err := svc.AddEndpoint("interrupt", w.answerable("interrupt", true, micro.ContextHandler(ctx, w.handleInterrupt)),
		micro.WithEndpointSubject(w.names.InterruptRequests())); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// Approvals: see approvals.go.
	if err := svc.AddEndpoint("approve", w.answerable("approve", true, micro.ContextHandler(ctx, w.handleApprove)),
		micro.WithEndpointSubject(w.names.ApproveRequests())); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	if err := svc.AddEndpoint("read-approvals", w.answerable("read-approvals", false, micro.ContextHandler(ctx, w.handleReadApprovals)),
		micro.WithEndpointSubject(w.names.ReadApprovalsSubject())); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// The queue view and the workers' loads it gathers: see queue.go.
	if err := svc.AddEndpoint("read-queue", w.answerable("read-queue", false, micro.ContextHandler(ctx, w.handleReadQueue)),
		micro.WithEndpointSubject(w.names.ReadQueueSubject())); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	stopLoad, err := w.serveLoad()
	if err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// Sessions' requests: see sessionsvc.go.
	if err := w.addSessionEndpoints(ctx, svc); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// The read relay: see read.go.
	if err := w.addReadEndpoints(ctx, svc); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// Ready means answering: the server has the subscriptions once the
	// flush returns.
	if err := w.svc.FlushTimeout(5 * time.Second); err != nil {
		stopLoad()
		_ = svc.Stop()
		return nil, err
	}
	return func() error { stopLoad(); return svc.Stop() }, nil
}

// Reasons a request is refused before any action (label reason of
// baton_requests_refused_total).
const (
	refusedNoReply = "no_reply"            // nobody to answer: a reply is the only proof of a requester's inbox
	refusedReply   = "reply_outside_inbox" // an answer there would carry this worker's rights
)

// answerable wraps an endpoint's handler: h sees only requests whose reply
// subject protocol.ReplyAllowed lets this worker answer, for the run the
// subject's last token names when perRun (a client's inbox, or that run's
// token inbox), else for no run (a client's inbox). Any other request is
// dropped before h does anything (no cancel recorded, no input stored),
// unanswered, counted and logged (refusalLog). The confused deputy of
// finding F0: without it a `client` deleted BATON_EVENTS by asking to
// cancel a missing run with the reply $JS.API.STREAM.DELETE.BATON_EVENTS.
func (w *Worker) answerable(endpoint string, perRun bool, h micro.Handler) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		runID := ""
		if perRun {
			// An id the handler refuses allows no run inbox either.
			if id := req.Subject()[strings.LastIndexByte(req.Subject(), '.')+1:]; protocol.ValidRunID(id) {
				runID = id
			}
		}
		reply := req.Reply()
		if protocol.ReplyAllowed(reply, runID) {
			h.Handle(req)
			return
		}
		reason := refusedReply
		if reply == "" {
			reason = refusedNoReply
		}
		w.metrics.requestsRefused.WithLabelValues(endpoint, reason).Inc()
		if n, ok := w.refusals.note(time.Now()); ok {
			w.log.Warn().Str("endpoint", endpoint).Str("subject", clip(req.Subject())).Str("reply", clip(reply)).
				Str("reason", reason).Int("refused_since_last_log", n).
				Msg("refused a request whose reply subject is not the requester's inbox; nothing done, no answer")
		}
	})
}

// refusalLogEvery bounds the warnings of refused requests: one at once,
// then at most one per interval, each counting those it stands for, so
// an attacker cannot flood the log (the metric counts every one).
const refusalLogEvery = 10 * time.Second

// refusalLog decides which refusals are logged.
type refusalLog struct {
	mu      sync.Mutex
	last    time.Time
	pending int
}

// note records a refusal at now and reports whether to log it, with the
// number of refusals (this one included) since the last line logged.
func (l *refusalLog) note(now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending++
	if !l.last.IsZero() && now.Sub(l.last) < refusalLogEvery {
		return 0, false
	}
	n := l.pending
	l.last, l.pending = now, 0
	return n, true
}

// clip bounds a subject put in a log line.
func clip(s string) string {
	const maxLogged = 128
	if len(s) > maxLogged {
		return s[:maxLogged] + "…"
	}
	return s
}

func (w *Worker) statusInfo() protocol.WorkerStatus {
	w.mu.Lock()
	runs := make([]protocol.WorkerRun, 0, len(w.active))
	for id, r := range w.active {
		runs = append(runs, protocol.WorkerRun{RunID: id, Epoch: r.lease.Epoch(), LastSeq: r.chain.LastSeq()})
	}
	w.mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].RunID < runs[j].RunID })
	free, full := w.intake.Load(w.cfg.Concurrency)
	return protocol.WorkerStatus{Worker: w.id, Node: w.node, Version: Version, Concurrency: w.cfg.Concurrency, Runs: runs,
		Free: free, FullProfiles: full}
}
