// Package runtoken issues NATS credentials that let a browser watch exactly
// one run: a user JWT, signed by the deployment's account signing key, whose
// permissions allow reading that run's chain (a live subscription, or an
// ordered consumer of the events stream filtered to the run) and, when
// asked, sending its input; WebSocket connections only; with an expiry.
//
// The token is presented to nats-server as the connect token (or JWT).
// The server, configured with an auth callout (deploy/nats-browser.conf),
// asks Callout, which checks the token's signature and expiry and answers
// with a user JWT for that connection carrying the same permissions. See
// docs/security.md for where the signing key lives.
package runtoken
