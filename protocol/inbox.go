package protocol

import "strings"

// Inbox namespaces. Every identity's inbox prefix is built here, and each
// begins with a first subject token no other identity's can have, so no
// permission granted on one namespace reaches another:
//
//	_INBOX.…                 clients, the console, the nats CLI (nats.go's default)
//	_INBOX_baton_worker.…    workers (WorkerInboxPrefix)
//	_INBOX_run.<runId>.…     a run token's connection (RunInboxPrefix)
//
// A run id cannot hold a '.', so "_INBOX_run.<runId>" is one namespace per
// run, and no run id, "baton_worker" included, names another's.
const (
	// ClientInboxPrefix is nats.go's default inbox prefix, which clients use.
	ClientInboxPrefix = "_INBOX"
	// WorkerInboxPrefix is the inbox prefix of a worker's connections: no
	// other user may subscribe there.
	WorkerInboxPrefix = "_INBOX_baton_worker"
	runInboxToken     = "_INBOX_run"
)

// MaxReplyLen bounds a reply subject a service answers on: inboxes are
// short (nats.go's are under 60 bytes), and nothing outside data chooses a
// subject's length past it.
const MaxReplyLen = 256

// RunInboxPrefix is the inbox prefix a client of runID's token must use
// (nats.CustomInboxPrefix, or inboxPrefix in nats.js).
func RunInboxPrefix(runID string) string { return runInboxToken + "." + runID }

// ReplyAllowed reports whether a service may answer a request about runID
// (empty for requests about no run) on reply: a client's inbox
// (_INBOX.<token>…) or, for a run, that run's token inbox
// (_INBOX_run.<runID>.<token>…). Anything else — a JetStream API or KV
// subject, a run's chain, the workers' inbox, another run's inbox — is
// where an answer would carry the answerer's rights (a confused deputy),
// so it gets none.
func ReplyAllowed(reply, runID string) bool {
	if len(reply) > MaxReplyLen {
		return false
	}
	rest, ok := strings.CutPrefix(reply, ClientInboxPrefix+".")
	if !ok && runID != "" {
		rest, ok = strings.CutPrefix(reply, RunInboxPrefix(runID)+".")
	}
	return ok && validInboxTail(rest)
}

// validInboxTail reports whether s is one or more dot-separated tokens of
// letters, digits, '_' and '-': what nats.go and nats.js generate, and no
// wildcard.
func validInboxTail(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if !validChars(tok, MaxReplyLen, "_-") {
			return false
		}
	}
	return true
}
