package worker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton/protocol"
)

// The read relay (protocol/read.go): clients and run tokens have no
// consumer create and no direct get, so no body of theirs reaches the
// JetStream API. A worker turns each page request into one direct get it
// builds itself, the filter from the subject's run id, with the
// requester's inbox as the reply: the server streams the stored messages
// and the EOB there, and the worker publishes once per page.

// directGet is the server's direct get request (JSApiMsgGetRequest).
type directGet struct {
	Seq      uint64 `json:"seq,omitempty"`
	LastFor  string `json:"last_by_subj,omitempty"`
	NextFor  string `json:"next_by_subj,omitempty"`
	Batch    int    `json:"batch,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// readEndpoint is one relay endpoint: on subject, or when that is empty on
// ReadRequests(kind), whose last token is the run id.
type readEndpoint struct {
	kind    string
	subject string
	serve   func(ctx context.Context, runID string, r protocol.ReadRequest) (stream string, get directGet, err error)
}

// errReadRefused is a request the relay answers with a 400.
var errReadRefused = errors.New("refused")

// readRelay serves the relay's endpoints; its direct gets go out on nc,
// whose user may read the streams.
type readRelay struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	names protocol.Names
	log   zerolog.Logger
}

// addReadEndpoints registers the relay's endpoints on the worker's service.
func (w *Worker) addReadEndpoints(ctx context.Context, svc micro.Service) error {
	return (&readRelay{nc: w.nc, js: w.js, names: w.names, log: w.log}).add(ctx, svc)
}

// ReadRelayName is the micro service ServeReadRelay registers.
const ReadRelayName = "baton-read-relay"

// ReadRelayOption configures ServeReadRelay.
type ReadRelayOption func(*readRelayOptions)

type readRelayOptions struct{ svc *nats.Conn }

// WithReadRelayServiceConn serves the relay's endpoints from svc, which
// receives the requests and answers refusals, as a worker's service
// connection does (its user, worker-svc in the shipped confs, may publish
// only into inboxes); the direct gets stay on the main connection.
func WithReadRelayServiceConn(svc *nats.Conn) ReadRelayOption {
	return func(o *readRelayOptions) { o.svc = svc }
}

// ServeReadRelay serves the read relay alone on nc until ctx ends or stop
// is called: for a deployment's readers where no worker runs, and for
// tests of clients. Workers serve it as part of their own service.
func ServeReadRelay(ctx context.Context, nc *nats.Conn, names protocol.Names, log zerolog.Logger, opts ...ReadRelayOption) (stop func() error, err error) {
	o := readRelayOptions{svc: nc}
	for _, opt := range opts {
		opt(&o)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	svc, err := micro.AddService(o.svc, micro.Config{Name: ReadRelayName, Version: Version,
		Description: "baton read relay: clients' reads of run chains, records, the DLQ and outputs"})
	if err != nil {
		return nil, err
	}
	r := &readRelay{nc: nc, js: js, names: names, log: log}
	if err := r.add(ctx, svc); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	if err := o.svc.FlushTimeout(5 * time.Second); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	context.AfterFunc(ctx, func() { _ = svc.Stop() })
	return svc.Stop, nil
}

// add registers the relay's endpoints on svc.
func (rl *readRelay) add(ctx context.Context, svc micro.Service) error {
	n := rl.names
	page := func(r protocol.ReadRequest, filter string) directGet {
		return directGet{Seq: max(r.From, 1), NextFor: filter, Batch: r.Max, MaxBytes: protocol.ReadMaxBytes}
	}
	runsStream, runsKey := "KV_"+n.RunsBucket(), "$KV."+n.RunsBucket()+"."
	sessionsStream, sessionsKey := "KV_"+n.SessionsBucket(), "$KV."+n.SessionsBucket()+"."
	for _, e := range []readEndpoint{
		{kind: "events", serve: func(_ context.Context, runID string, r protocol.ReadRequest) (string, directGet, error) {
			return n.EventsStream(), page(r, n.RunFilter(runID)), nil
		}},
		{kind: "status", serve: func(_ context.Context, runID string, _ protocol.ReadRequest) (string, directGet, error) {
			return n.EventsStream(), directGet{LastFor: n.StatusSubject(runID)}, nil
		}},
		{kind: "run", serve: func(_ context.Context, runID string, _ protocol.ReadRequest) (string, directGet, error) {
			return runsStream, directGet{LastFor: runsKey + runID}, nil
		}},
		{kind: "runs", subject: n.ReadRunsSubject(), serve: func(_ context.Context, _ string, r protocol.ReadRequest) (string, directGet, error) {
			return runsStream, page(r, runsKey+">"), nil
		}},
		{kind: "session", serve: func(_ context.Context, id string, _ protocol.ReadRequest) (string, directGet, error) {
			return sessionsStream, directGet{LastFor: sessionsKey + id}, nil
		}},
		{kind: "sessions", subject: n.ReadSessionsSubject(), serve: func(_ context.Context, _ string, r protocol.ReadRequest) (string, directGet, error) {
			return sessionsStream, page(r, sessionsKey+">"), nil
		}},
		{kind: "dlq", subject: n.ReadDLQSubject(), serve: func(_ context.Context, _ string, r protocol.ReadRequest) (string, directGet, error) {
			return n.DLQStream(), page(r, n.DLQSubjects()[0]), nil
		}},
		{kind: "object", serve: func(_ context.Context, runID string, r protocol.ReadRequest) (string, directGet, error) {
			if !strings.HasPrefix(r.Name, runID+"/") {
				return "", directGet{}, errReadRefused
			}
			b := n.OutputsBucket()
			return "OBJ_" + b, directGet{LastFor: "$O." + b + ".M." + base64.URLEncoding.EncodeToString([]byte(r.Name))}, nil
		}},
		{kind: "chunks", serve: func(ctx context.Context, runID string, r protocol.ReadRequest) (string, directGet, error) {
			if !strings.HasPrefix(r.Name, runID+"/") {
				return "", directGet{}, errReadRefused
			}
			b := n.OutputsBucket()
			obs, err := rl.js.ObjectStore(ctx, b)
			if err != nil {
				return "", directGet{}, err
			}
			info, err := obs.GetInfo(ctx, r.Name)
			if err != nil {
				return "", directGet{}, err
			}
			return "OBJ_" + b, page(r, "$O."+b+".C."+info.NUID), nil
		}},
	} {
		subject := e.subject
		if subject == "" {
			subject = n.ReadRequests(e.kind)
		}
		if err := svc.AddEndpoint("read-"+e.kind, micro.ContextHandler(ctx, rl.handler(e)),
			micro.WithEndpointSubject(subject)); err != nil {
			return err
		}
	}
	return nil
}

// handler checks a request's reply and body, then asks the server for
// the direct get e builds, answered to the requester's inbox.
func (rl *readRelay) handler(e readEndpoint) func(context.Context, micro.Request) {
	return func(ctx context.Context, req micro.Request) {
		var runID string
		if e.subject == "" {
			id, ok := rl.names.ParseReadSubject(e.kind, req.Subject())
			if !ok {
				return // micro's subscription is <kind>.*: cannot happen
			}
			runID = id
		}
		if !protocol.ReplyAllowed(req.Reply(), runID) {
			rl.log.Debug().Str("subject", req.Subject()).Str("reply", req.Reply()).Msg("read request with a reply outside the requester's inbox: not answered")
			return
		}
		r, err := protocol.DecodeReadRequest(req.Data())
		if err != nil {
			_ = req.Error("400", err.Error(), nil)
			return
		}
		stream, get, err := e.serve(ctx, runID, r)
		switch {
		case errors.Is(err, errReadRefused):
			_ = req.Error("400", "object name is not one of run "+runID+"'s", nil)
			return
		case errors.Is(err, jetstream.ErrObjectNotFound):
			_ = req.Error("404", "no such object", nil)
			return
		case err != nil:
			_ = req.Error("503", err.Error(), nil)
			return
		}
		body, _ := json.Marshal(get)
		if err := rl.nc.PublishMsg(&nats.Msg{Subject: "$JS.API.DIRECT.GET." + stream, Reply: req.Reply(), Data: body}); err != nil {
			_ = req.Error("503", err.Error(), nil)
		}
	}
}
