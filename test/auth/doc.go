// Package auth holds the end-to-end suites of NATS permissions: the shipped
// accounts' users against what each may do, tenants kept apart, hostile
// replies, workspace attacks and a browser's run token over WebSocket.
package auth
