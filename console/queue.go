package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/batonhq/baton/client"
)

// serveQueue is the concurrency keys' queue (client.Queue, which one
// worker answers on <prefix>.read.queue): each key's running jobs against
// its limit, its weight, and its first waiting jobs with their position
// and why they wait. ?key= keeps one key, ?limit= lists up to that many
// jobs per key. A bad key or limit is 400; no worker answering, 503; a
// worker's refusal, 502.
func (c *Console) serveQueue(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var opts []client.QueueOption
	if k := q.Get("key"); k != "" {
		opts = append(opts, client.WithQueueKey(k))
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("limit %q: not a number", l))
			return
		}
		opts = append(opts, client.WithQueueLimit(n))
	}
	v, err := c.client.Queue(r.Context(), opts...)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.Is(err, client.ErrInvalidOption):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, client.ErrNoWorker):
		c.unavailable(w, err)
	default:
		writeError(w, http.StatusBadGateway, err)
	}
}
