package protocol

// InputSubject is where clients send a run's input (DESIGN.md section 12):
// a JetStream publish, acknowledged by the input stream.
func (n Names) InputSubject(runID string) string { return n.prefix + ".input." + runID }

// OutputsBucket is the Object Store bucket of runs' outputs, named
// "<runId>/<name>" in it.
func (n Names) OutputsBucket() string { return n.upper + "_OUTPUTS" }
