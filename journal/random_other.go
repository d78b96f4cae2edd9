//go:build !linux

package journal

import "crypto/rand"

// random fills b from crypto/rand, which crashes the program rather than
// fail.
func random(b []byte) { _, _ = rand.Read(b) }
