// Package protocol owns baton's wire contract with the outside world: the
// NATS subject and resource names, the message headers, the job format that
// any publisher may send, and the status messages that subscribers receive.
// Everything a client in another language must know is defined here, and
// nothing here depends on a NATS connection.
package protocol
