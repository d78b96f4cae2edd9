// Package clock owns waiting on time: a sleep that a context cuts short,
// the one every loop of the worker, the intake and the publisher pauses
// with.
package clock
