// Package runid says what can name a run, with the standard library only:
// the runner stages link it, and with it neither protocol nor the job
// decoder's msgpack.
package runid
