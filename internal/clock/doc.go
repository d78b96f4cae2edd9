// Package clock owns waiting on time: a sleep that a context cuts short,
// the one every loop of the worker, the intake and the publisher pauses
// with, and the Clock a service or a lease reads, sleeps and sets its
// timers and tickers on, which a test swaps for a Manual one it moves
// itself.
package clock
