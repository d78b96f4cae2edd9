//go:build linux && !amd64 && !arm64

package seccomp

// Native has no filter for this architecture, and the sandbox refuses to
// run an agent unfiltered.
func Native() (Arch, error) { return Arch{}, errUnsupported }
