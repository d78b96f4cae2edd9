// Package test holds baton's end-to-end suites: the real baton binary run
// as separate worker processes against a real nats-server, driven the way
// a user drives it. Later suites (chaos, escape, benchmarks) live here too.
package test
