package runspec

// Outputs is what the worker captures from a run's workspace when it ends.
// The yaml tags are config's: config.Outputs is this type.
type Outputs struct {
	// Diff asks for <runId>/diff.patch: the workspace against its seed.
	Diff bool `yaml:"diff" json:"diff,omitempty"`
	// Files are patterns of workspace files stored whole as
	// <runId>/files/<path>: "*" and "?" within a segment, "**" for any
	// number of segments ("out/**", "**/*.md").
	Files []string `yaml:"files" json:"files,omitempty"`
	// Within are a job's patterns (protocol.JobOutputs): a file is
	// captured only if it matches Files and, when set, one of these.
	Within []string `yaml:"-" json:"within,omitempty"`
}

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

// OrDefault is m, or StdinOnce when m is empty.
func (m StdinMode) OrDefault() StdinMode {
	if m == "" {
		return StdinOnce
	}
	return m
}

// Valid reports whether m is empty, StdinOnce or StdinStream.
func (m StdinMode) Valid() bool { return m == "" || m == StdinOnce || m == StdinStream }
