package journal

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// random fills b from the kernel's CSPRNG, as crypto/rand does on Linux,
// without linking crypto/rand: its package init (the FIPS DRBG's) ran in
// each of a cold run's six runner starts, which link journal but never
// make a nonce. Up to 256 bytes, getrandom(2) returns them all once the
// pool is ready; before, it blocks and a signal may interrupt it.
func random(b []byte) {
	for {
		n, err := unix.Getrandom(b, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n != len(b) {
			// As crypto/rand does: never a short or guessable nonce.
			panic(fmt.Sprintf("journal: getrandom: %d of %d bytes: %v", n, len(b), err))
		}
		return
	}
}
