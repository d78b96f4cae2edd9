package config

// StdinMode is how a run's stdin pipe is fed (a profile's `stdin`).
type StdinMode string

const (
	// StdinOnce writes the job's input to the agent's stdin and closes it.
	StdinOnce StdinMode = "once"
	// StdinStream writes the job's input and keeps stdin open: input
	// messages sent to the run follow, each written once, in order, until
	// one carries end-of-input or the run ends.
	StdinStream StdinMode = "stream"
)

// Input message bounds (maxInputBytes).
const (
	DefaultMaxInputBytes = 64 << 10
	// MaxInputBytesLimit keeps one input, with its journal record, well
	// under any server's max payload and the journal's max line.
	MaxInputBytesLimit = 256 << 10
)

// OrDefault is m, or StdinOnce when m is empty.
func (m StdinMode) OrDefault() StdinMode {
	if m == "" {
		return StdinOnce
	}
	return m
}

func (m StdinMode) valid() bool { return m == "" || m == StdinOnce || m == StdinStream }
