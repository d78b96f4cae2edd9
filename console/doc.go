// Package console is baton's web console: an http.Handler that lists runs,
// shows one run's live transcript (replayed from its first message, then
// followed), its status timeline, the workers and the dead-letter queue;
// it cancels and re-runs runs, and retries and deletes dead letters.
// Its assets are embedded; it needs no network beyond NATS at run time.
//
// Auth is on by default: New refuses to build a handler without a token
// (WithToken) unless the embedding application takes auth on itself
// (WithoutAuth). See docs/security.md.
package console
