package protocol

import (
	"encoding/json"
	"time"
)

// Approvals: every permission prompt of a run whose profile has a policy
// (Claude Code's control_request can_use_tool, a Codex app-server
// */requestApproval) is an Approval record in ApprovalsBucket, under
// ApprovalKey. The policy decides it at once (allow, deny) or asks a
// human (state pending), who answers on ApproveSubject; the run's worker
// writes the answer to the agent's stdin, once, as an input of kind
// InputKindDecision.

// ApprovalsBucket is the KV bucket of approval records.
func (n Names) ApprovalsBucket() string { return n.upper + "_APPROVALS" }

// ValidApprovalID reports whether id can name an approval: a plain token
// ([A-Za-z0-9_-]{1,64}), as policy.Request.ApprovalID makes.
func ValidApprovalID(id string) bool { return validToken(id) }

// ApprovalKey is the key of approval id of runID in ApprovalsBucket.
func ApprovalKey(runID, id string) string { return runID + "." + id }

// ApprovalKeys matches every approval key of runID.
func ApprovalKeys(runID string) string { return runID + ".*" }

// ApproveSubject is where a client answers an approval of runID, as a
// request (ApproveRequest); workers answer it in one queue group with the
// decided Approval, or an error code (ApprovalConflict when it was
// answered before).
func (n Names) ApproveSubject(runID string) string { return n.prefix + ".control.approve." + runID }

// ApproveRequests is the subject workers answer approve requests on.
func (n Names) ApproveRequests() string { return n.prefix + ".control.approve.*" }

// ApprovalNoticeSubject is where the run's worker publishes (core NATS)
// the Approval record of runID each time it changes: asked, decided,
// held, answered. The record in ApprovalsBucket is the truth; a client
// that missed a notice reads it there (ReadApprovalsSubject).
func (n Names) ApprovalNoticeSubject(runID string) string { return n.prefix + ".approvals." + runID }

// ApprovalNotices matches every run's approval notices.
func (n Names) ApprovalNotices() string { return n.prefix + ".approvals.*" }

// ReadApprovalsSubject is where workers list approval records
// (ApprovalsQuery, answered with ApprovalsReply).
func (n Names) ReadApprovalsSubject() string { return n.prefix + ".read.approvals" }

// Approval states.
const (
	ApprovalPending = "pending"
	ApprovalAllowed = "allowed"
	ApprovalDenied  = "denied"
)

// Who decided, when not a person.
const (
	// DecidedByPolicy: the profile's (or the job's) policy rule.
	DecidedByPolicy = "policy"
	// DecidedByTimeout: nobody answered within the profile's askTimeout;
	// the agent was told the request awaits approval (the record stays
	// pending: a person may still allow it, and the agent is then told
	// to retry).
	DecidedByTimeout = "timeout"
)

// Approval is one permission prompt of a run and what became of it.
type Approval struct {
	RunID string `json:"runId"`
	// ID names the prompt within its run: the agent's request id when
	// it is a plain token ([A-Za-z0-9_-]{1,64}), else a digest of it.
	ID string `json:"id"`
	// Agent is the prompt's dialect: "claude" or "codex".
	Agent string `json:"agent"`
	// Tool is the tool asked for (Claude's tool_name; "Bash" for a Codex
	// command, "Edit" for a Codex file change), Target what it acts on
	// (the command, or the file path), as the policy matched them.
	Tool   string          `json:"tool"`
	Target string          `json:"target,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
	// Truncated: Input (left out) or Target (cut) was too long to keep;
	// the agent's line on the chain has all of it.
	Truncated bool `json:"truncated,omitempty"`
	// Verdict is the policy's: allow, ask or deny; Rule the rule that
	// matched ("deny: Bash(curl *)", or "default: ask").
	Verdict string `json:"verdict"`
	Rule    string `json:"rule"`
	// State is pending until a person (or the policy) decides.
	State     string     `json:"state"`
	AskedAt   time.Time  `json:"askedAt"`
	DecidedBy string     `json:"decidedBy,omitempty"`
	DecidedAt *time.Time `json:"decidedAt,omitempty"`
	// Message is a denial's reason for the agent.
	Message string `json:"message,omitempty"`
	// HeldAt is when the agent was told the request awaits approval
	// (askTimeout passed with no answer); an allow after it is a
	// follow-up turn asking the agent to retry.
	HeldAt *time.Time `json:"heldAt,omitempty"`
	// HoldSeq and AnswerSeq are the input stream sequences of what baton
	// wrote to the agent: the hold (a denial saying it awaits approval)
	// and the answer (or, after a hold, the follow-up turn). 0: not yet.
	HoldSeq   uint64 `json:"holdSeq,omitempty"`
	AnswerSeq uint64 `json:"answerSeq,omitempty"`
	// Offset and End are the prompt's line in the run's journal, from
	// which its answer is made.
	Offset int64 `json:"offset"`
	End    int64 `json:"end"`
}

// Open reports whether the agent waits on a: nobody decided, and it was
// not held.
func (a Approval) Open() bool { return a.State == ApprovalPending && a.HeldAt == nil }

// ApproveRequest is the body of an approve request.
type ApproveRequest struct {
	ID    string `json:"id"`
	Allow bool   `json:"allow"`
	// Message is a denial's reason, for the agent.
	Message string `json:"message,omitempty"`
	// By names who decides (a user name); "human" when empty.
	By string `json:"by,omitempty"`
}

// Error codes of a refused approve request (Nats-Service-Error-Code).
const (
	ApprovalBad      = "400" // a bad runId, id or body
	ApprovalNotFound = "404" // no such approval
	ApprovalConflict = "409" // decided before (the reply's description says how)
	ApprovalGone     = "410" // the run ended: nothing waits on the answer
	ApprovalFailed   = "500" // the record could not be read or written
)

// ApprovalsQuery asks for approval records: of one run (RunID), or of
// every run; only pending ones with Pending.
type ApprovalsQuery struct {
	RunID   string `json:"runId,omitempty"`
	Pending bool   `json:"pending,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// ApprovalsReply lists approval records, oldest ask first.
type ApprovalsReply struct {
	Approvals []Approval `json:"approvals"`
	// Truncated: more matched than the query's limit.
	Truncated bool `json:"truncated,omitempty"`
}

// Input kinds (HeaderInputKind) of what baton itself writes to an agent
// with a policy.
const (
	// InputKindDecision answers a permission prompt (allow or deny), or
	// holds it (askTimeout): HeaderApproval, HeaderDecidedBy and, for a
	// policy's, HeaderRule say which and who.
	InputKindDecision = "decision"
	// InputKindFollowUp is the turn baton sends an agent once a person
	// allowed a request it was told awaits approval.
	InputKindFollowUp = "followup"
)

// Headers of decision and follow-up inputs, stored and on the chain; the
// chain's message of the prompt line itself carries HeaderApproval,
// HeaderVerdict and HeaderRule too, so a viewer knows at the prompt
// whether a person is asked.
const (
	HeaderApproval  = "Baton-Approval"
	HeaderDecidedBy = "Baton-Decided-By"
	HeaderRule      = "Baton-Rule"
	// HeaderVerdict is the policy's verdict (allow, ask, deny) on a
	// prompt line's chain message.
	HeaderVerdict = "Baton-Verdict"
)

// DecisionHeaders are the headers a stored input of baton's own carries
// to the chain.
var DecisionHeaders = []string{HeaderInputKind, HeaderApproval, HeaderDecidedBy, HeaderRule}

// ReasonApproval is the reason of a "waiting" status while a person's
// answer to a permission prompt is awaited.
const ReasonApproval = "approval"

// FollowUpMsgID is the message id of the follow-up turn sent to a
// paused session when a person allows a request its run held: the run
// that starts with it (unless a run of the session is live, which
// takes it as input) is SessionRunID(session, FollowUpMsgID(runID, id)).
func FollowUpMsgID(runID, id string) string { return "followup-" + runID + "-" + id }
