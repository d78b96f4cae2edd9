package leader_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/internal/leader"
	"github.com/batonhq/baton/internal/testenv"
)

// TestGetAsksAgainWhileNoOneAnswers: a server with no JetStream API for
// now answers "no responders"; Get asks again until its bound, and gets
// the message once the API answers (a cluster's server catching up), or
// says it waited for nobody when none ever does.
func TestGetAsksAgainWhileNoOneAnswers(t *testing.T) {
	s := testenv.RunServerWith(t, func(o *server.Options) { o.JetStream = false })
	nc, _ := testenv.Connect(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := leader.Get(ctx, nc, "S", 1, ""); !errors.Is(err, nats.ErrNoResponders) || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("Get with nobody answering: %v after %v, want no responders once its bound ended", err, time.Since(start))
	}

	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = nc.Subscribe("$JS.API.STREAM.MSG.GET.S", func(m *nats.Msg) {
			b, _ := json.Marshal(map[string]any{"message": map[string]any{"subject": "a.b", "seq": 7, "data": []byte("hi")}})
			_ = m.Respond(b)
		})
	}()
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	m, err := leader.Get(ctx, nc, "S", 7, "")
	if err != nil || m.Sequence != 7 || string(m.Data) != "hi" || m.Subject != "a.b" {
		t.Fatalf("Get once the API answers: %+v, %v", m, err)
	}
}
