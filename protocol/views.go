package protocol

// OutputsBucket is the Object Store bucket of runs' outputs, named
// "<runId>/<name>" in it.
func (n Names) OutputsBucket() string { return n.upper + "_OUTPUTS" }
