package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/protocol"
)

// workerView is one worker as the workers page shows it: its micro service
// info and what its status endpoint says it holds.
type workerView struct {
	ID      string                 `json:"id"`
	Node    string                 `json:"node"`
	Version string                 `json:"version"`
	Status  *protocol.WorkerStatus `json:"status,omitempty"`
	Error   string                 `json:"error,omitempty"`
}

// nodeView is one node record as the workers page reads it: the record
// itself has msgpack names only, which JSON would send as Go's field names.
type nodeView struct {
	ID        string    `json:"id"`
	Workers   int       `json:"workers"`
	Capacity  int       `json:"capacity"`
	Version   string    `json:"version"`
	Heartbeat time.Time `json:"heartbeat"`
	Age       string    `json:"age"` // since the heartbeat, rounded to the second
}

// workersWait is how long the console collects service info replies: every
// worker answers the one discovery request at once.
const workersWait = 500 * time.Millisecond

func (c *Console) serveWorkers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	out := struct {
		Workers []workerView `json:"workers"`
		Nodes   []nodeView   `json:"nodes"`
		Errors  []string     `json:"errors,omitempty"`
	}{Workers: []workerView{}, Nodes: []nodeView{}}

	workers, err := c.discover(ctx)
	if err != nil {
		out.Errors = append(out.Errors, "workers: "+err.Error())
	}
	out.Workers = workers
	nodes, err := kv.ReadAll[kv.NodeRecord](ctx, c.js, c.names.NodesBucket())
	if err != nil {
		out.Errors = append(out.Errors, "nodes: "+err.Error())
	}
	for _, n := range nodes {
		v := n.Value
		out.Nodes = append(out.Nodes, nodeView{ID: v.ID, Workers: v.Workers, Capacity: v.Capacity, Version: v.Version,
			Heartbeat: v.Heartbeat, Age: time.Since(v.Heartbeat).Round(time.Second).String()})
	}
	slices.SortFunc(out.Nodes, func(a, b nodeView) int { return strings.Compare(a.ID, b.ID) })
	if err := c.natsDown(); err != nil { // the cause of every error above
		out.Errors = []string{err.Error()}
	}
	writeJSON(w, http.StatusOK, out)
}

// discover asks every worker's micro service for its info (the request
// `nats micro info baton-worker` sends), then each one's status endpoint.
func (c *Console) discover(ctx context.Context) ([]workerView, error) {
	nc := c.js.Conn()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	subj, err := micro.ControlSubject(micro.InfoVerb, protocol.WorkerService, "")
	if err != nil {
		return nil, err
	}
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		return nil, err
	}
	var out []workerView
	deadline := time.Now().Add(workersWait)
	for {
		msg, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			break // the wait is over (or the connection closed)
		}
		var info micro.Info
		if json.Unmarshal(msg.Data, &info) != nil {
			continue
		}
		out = append(out, workerView{ID: info.Metadata["worker"], Node: info.Metadata["node"], Version: info.Version})
	}
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func(v *workerView) {
			defer wg.Done()
			msg, err := nc.RequestWithContext(ctx, c.names.WorkerStatusSubject(v.ID), nil)
			if err != nil {
				v.Error = err.Error()
				return
			}
			var st protocol.WorkerStatus
			if err := json.Unmarshal(msg.Data, &st); err != nil {
				v.Error = "unreadable status: " + err.Error()
				return
			}
			v.Status = &st
		}(&out[i])
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b workerView) int { return strings.Compare(a.ID, b.ID) })
	if out == nil {
		return []workerView{}, errors.New("no worker answered")
	}
	return out, nil
}
