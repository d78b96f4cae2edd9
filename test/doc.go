// Package test holds baton's end-to-end suites of processes: the real baton
// binary run as separate worker processes against a real nats-server, driven
// the way a user drives it, the chaos suite (SIGKILL, SIGTERM and NATS
// restarts), systemd, and the docs pages' recipes. The sandbox escape and
// real agent suites are in test/escape, the browser's in test/browser, the
// NATS permissions' in test/auth (separate packages, so go test runs them
// beside this one); test/internal/e2e holds the helpers they share.
package test
