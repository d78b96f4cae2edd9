package worker

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/nats-io/nats.go/micro"
)

// ServiceName is the NATS micro service every worker registers, so
// `nats micro ls` and `nats micro info baton-worker` list the fleet.
const ServiceName = "baton-worker"

// RunInfo describes a run a worker holds, as its status endpoint reports.
type RunInfo struct {
	RunID   string `json:"runId"`
	Epoch   uint64 `json:"epoch"`
	LastSeq uint64 `json:"lastSeq"`
}

// StatusInfo is the reply of a worker's status endpoint.
type StatusInfo struct {
	Worker      string    `json:"worker"`
	Node        string    `json:"node"`
	Version     string    `json:"version"`
	Concurrency int       `json:"concurrency"`
	Runs        []RunInfo `json:"runs"`
}

// serve registers the micro service, which stops when ctx ends. Its "status" endpoint,
// on <prefix>.worker.<id>.status, answers with StatusInfo; its "cancel"
// endpoint, on <prefix>.control.cancel.<runId>, records cancel intents.
func (w *Worker) serve(ctx context.Context) (stop func() error, err error) {
	svc, err := micro.AddService(w.nc, micro.Config{
		Name:        ServiceName,
		Version:     serviceVersion(),
		Description: "baton worker: durable sandboxed agent runs",
		Metadata:    map[string]string{"node": w.node, "worker": w.id},
	})
	if err != nil {
		return nil, err
	}
	g := svc.AddGroup(w.names.Prefix() + ".worker." + w.id)
	if err := g.AddEndpoint("status", micro.HandlerFunc(func(req micro.Request) {
		b, _ := json.Marshal(w.statusInfo())
		_ = req.Respond(b)
	})); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// Every worker answers cancel requests, one of them each (micro's
	// queue group): see handleCancel.
	if err := svc.AddEndpoint("cancel", micro.ContextHandler(ctx, w.handleCancel),
		micro.WithEndpointSubject(w.names.CancelRequests())); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	// And input requests, likewise: see handleInput.
	if err := svc.AddEndpoint("input", micro.ContextHandler(ctx, w.handleInput),
		micro.WithEndpointSubject(w.names.InputRequests())); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	if err := svc.AddEndpoint("interrupt", micro.ContextHandler(ctx, w.handleInterrupt),
		micro.WithEndpointSubject(w.names.InterruptRequests())); err != nil {
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
	if err := w.nc.FlushTimeout(5 * time.Second); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	return svc.Stop, nil
}

func (w *Worker) statusInfo() StatusInfo {
	w.mu.Lock()
	runs := make([]RunInfo, 0, len(w.active))
	for id, r := range w.active {
		runs = append(runs, RunInfo{RunID: id, Epoch: r.lease.Epoch(), LastSeq: r.chain.LastSeq()})
	}
	w.mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].RunID < runs[j].RunID })
	return StatusInfo{Worker: w.id, Node: w.node, Version: Version, Concurrency: w.cfg.Concurrency, Runs: runs}
}

// serviceVersion is Version when it is semver, as micro requires.
func serviceVersion() string {
	if Version == "dev" {
		return "0.0.0-dev"
	}
	return Version
}
