package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

// DecidedBy is who the console's Allow and Deny buttons decide as, in an
// approval's record and on the run's chain.
const DecidedBy = "console"

// serveApprovals lists a run's approvals (client.Approvals): the
// permission prompts its policy saw, and what became of them.
func (c *Console) serveApprovals(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	rep, err := c.client.Approvals(r.Context(), protocol.ApprovalsQuery{RunID: id})
	if err != nil {
		c.unavailable(w, err)
		return
	}
	if rep.Approvals == nil {
		rep.Approvals = []protocol.Approval{}
	}
	writeJSON(w, http.StatusOK, rep)
}

// approveBody is what the page's Allow and Deny buttons send.
type approveBody struct {
	Allow   bool   `json:"allow"`
	Message string `json:"message,omitempty"`
}

// serveApprove answers approval {aid} of the run (client.Approve): the
// decided record, or the refusal's status with its sentence and, for a
// second answer (409), the record as it stands, saying who decided it.
func (c *Console) serveApprove(w http.ResponseWriter, r *http.Request) {
	id, ok := c.runID(w, r)
	if !ok {
		return
	}
	aid := r.PathValue("aid")
	body, ok := readBody(w, r, "an approval's answer")
	if !ok {
		return
	}
	var b approveBody
	if err := json.Unmarshal(body, &b); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("an approval's answer: want {\"allow\": true|false, \"message\": TEXT}: %w", err))
		return
	}
	opts := []client.ApproveOption{client.WithDecidedBy(DecidedBy)}
	if !b.Allow {
		opts = append(opts, client.WithDeny(b.Message))
	}
	a, err := c.client.Approve(r.Context(), id, aid, opts...)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, a)
	case errors.Is(err, client.ErrApprovalConflict):
		rep := map[string]any{"error": err.Error()}
		if a.ID != "" {
			rep["approval"] = a
		}
		writeJSON(w, http.StatusConflict, rep)
	case errors.Is(err, client.ErrApprovalNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, client.ErrRunEnded):
		writeError(w, http.StatusGone, err)
	case errors.Is(err, client.ErrNoWorker):
		c.unavailable(w, err)
	default:
		// A refusal for the request itself (400), or the workers' failure.
		writeError(w, http.StatusBadGateway, err)
	}
}
