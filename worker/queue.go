package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/consumer"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// The queue view (protocol.Names.ReadQueueSubject): what waits in the
// keys' lanes, in the order it will start, and why it waits. Any worker
// answers (a queue group); it reads the lanes from the jobs stream, the
// keys' running jobs from the slots bucket, and the fleet's free slots
// from every worker's load (WorkersLoadSubject).

const (
	// loadWindow is how long the view waits for the workers' loads.
	loadWindow = 250 * time.Millisecond
	queueWait  = 10 * time.Second
)

func (w *Worker) handleReadQueue(ctx context.Context, req micro.Request) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueWait)
	defer cancel()
	q, err := protocol.DecodeQueueRequest(req.Data())
	if err != nil {
		_ = req.Error(protocol.QueueBad, err.Error(), nil)
		return
	}
	view, err := w.queueView(ctx, q)
	if err != nil {
		_ = req.Error(protocol.QueueFailed, "cannot read the queue: "+err.Error(), nil)
		return
	}
	b, _ := json.Marshal(view)
	_ = req.Respond(b)
}

// serveLoad answers the workers' load requests with this worker's free
// slots, on the main connection: only workers may publish the requests
// (deploy/nats-auth.conf), and each answers only into a workers' inbox,
// never a reply subject that would carry its rights elsewhere.
func (w *Worker) serveLoad() (stop func(), err error) {
	inbox := w.nc.NewInbox()
	prefix := inbox[:strings.LastIndexByte(inbox, '.')+1]
	sub, err := w.nc.Subscribe(w.names.WorkersLoadSubject(), func(m *nats.Msg) {
		tail, ok := strings.CutPrefix(m.Reply, prefix)
		if !ok || tail == "" || strings.ContainsAny(tail, "*> ") {
			return
		}
		free, full := w.intake.Load(w.cfg.Concurrency)
		b, _ := json.Marshal(protocol.WorkerLoad{Worker: w.id, Free: free, FullProfiles: full})
		_ = w.nc.Publish(m.Reply, b)
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// fleetLoad gathers the loads of the workers that answer within
// loadWindow.
func (w *Worker) fleetLoad(ctx context.Context) []protocol.WorkerLoad {
	inbox := w.nc.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := w.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := w.nc.PublishRequest(w.names.WorkersLoadSubject(), inbox, nil); err != nil {
		return nil
	}
	timer := time.NewTimer(loadWindow)
	defer timer.Stop()
	var out []protocol.WorkerLoad
	for {
		select {
		case m := <-ch:
			var l protocol.WorkerLoad
			if json.Unmarshal(m.Data, &l) == nil && l.Worker != "" {
				out = append(out, l)
			}
		case <-timer.C:
			return out
		case <-ctx.Done():
			return out
		}
	}
}

func (w *Worker) queueView(ctx context.Context, q protocol.QueueRequest) (protocol.QueueView, error) {
	st, err := w.js.Stream(ctx, w.names.JobsStream())
	if err != nil {
		return protocol.QueueView{}, err
	}
	filter := w.names.KeyJobs()
	if q.Key != "" {
		filter = w.names.KeyLanes(q.Key)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return protocol.QueueView{}, err
	}
	lanes := map[string][]int{} // key → priorities with jobs
	counts := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		if key, prio, ok := w.names.ParseKeyJobSubject(subj); ok && n > 0 {
			lanes[key] = append(lanes[key], prio)
			counts[key] += n
		}
	}
	loads := w.fleetLoad(ctx)
	view := protocol.QueueView{Workers: len(loads), Keys: []protocol.KeyQueue{}}
	for _, l := range loads {
		view.FreeSlots += l.Free
	}
	if c, err := w.js.Consumer(ctx, w.names.JobsStream(), consumer.DurableName); err == nil {
		if ci, err := c.Info(ctx); err == nil {
			view.Unkeyed = ci.NumPending + uint64(ci.NumAckPending)
		}
	}
	ten := w.tenancy.Load()
	keys := slices.Collect(maps.Keys(lanes))
	for _, k := range w.slots.Keys() {
		if !slices.Contains(keys, k) && (q.Key == "" || k == q.Key) {
			keys = append(keys, k)
		}
	}
	for _, key := range keys {
		kq := protocol.KeyQueue{Key: key, Running: w.slots.Held(key), Limit: ten.Limit(key), Weight: ten.Weight(key), Jobs: []protocol.QueuedJob{}}
		prios := lanes[key]
		slices.Sort(prios)
		slices.Reverse(prios)
		starting := 0
		for _, prio := range prios {
			jobs, n, err := w.laneJobs(ctx, st, key, prio, q.Limit-len(kq.Jobs))
			if err != nil {
				return protocol.QueueView{}, err
			}
			kq.Jobs = append(kq.Jobs, jobs...)
			starting += n
		}
		// Every stored job, listed or not, but those being started.
		kq.Waiting = max(0, int(counts[key])-starting)
		open := -1 // jobs of the key that may start now (-1: any number)
		if kq.Limit > 0 {
			open = max(0, kq.Limit-kq.Running)
		}
		for i := range kq.Jobs {
			j := &kq.Jobs[i]
			j.Position = i + 1
			j.Reason = waitReason(i, open, j.Profile, loads)
		}
		view.Keys = append(view.Keys, kq)
	}
	slices.SortFunc(view.Keys, func(a, b protocol.KeyQueue) int {
		return cmp.Or(cmp.Compare(b.Waiting, a.Waiting), cmp.Compare(a.Key, b.Key))
	})
	return view, nil
}

// waitReason says why the key's job at index i (0: its next) waits, when
// open of the key's jobs may start now (-1: any number).
func waitReason(i, open int, profile string, loads []protocol.WorkerLoad) protocol.WaitReason {
	if open >= 0 && i >= open {
		return protocol.WaitKeyLimit
	}
	free, room := 0, 0
	for _, l := range loads {
		if l.Free == 0 {
			continue
		}
		free += l.Free
		if !slices.Contains(l.FullProfiles, profile) {
			room += l.Free
		}
	}
	switch {
	case free == 0:
		return protocol.WaitNoWorker
	case room == 0:
		return protocol.WaitProfileLimit
	case i >= room:
		return protocol.WaitBehind
	}
	return protocol.WaitStarting
}

// laneJobs reads up to n waiting jobs of a lane, in order, and counts the
// jobs it passed whose run has a record: being started, not waiting.
func (w *Worker) laneJobs(ctx context.Context, st jetstream.Stream, key string, prio, n int) (jobs []protocol.QueuedJob, starting int, err error) {
	subj := w.names.KeyJobSubject(key, prio)
	for seq := uint64(1); len(jobs) < n; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		seq = m.Sequence + 1
		ct := m.Header.Get(protocol.HeaderContentType)
		job, derr := protocol.DecodeJob(m.Data, ct, protocol.Limits{})
		if derr != nil {
			// A worker rejects it to the DLQ when it comes to it.
			job.RunID = protocol.PeekRunID(m.Data, ct)
		}
		if job.RunID != "" {
			_, _, err := w.runs.Get(ctx, job.RunID)
			if err == nil {
				starting++
				continue
			}
			if !errors.Is(err, kv.ErrNotFound) {
				return nil, 0, err
			}
		}
		jobs = append(jobs, protocol.QueuedJob{RunID: job.RunID, Profile: job.Profile, Priority: prio, Since: m.Time.UTC()})
	}
	return jobs, starting, nil
}
