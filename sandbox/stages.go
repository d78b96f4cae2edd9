package sandbox

// The runner chain's stages, each named for the subcommand that runs it
// (Stages, in stages_linux.go, says what each does).
const (
	StageOuter      = "runner-outer"
	StageOuterWait  = "runner-outer-wait"
	StageInner      = "runner-inner"
	StageInnerChild = "runner-inner-child"
	StageInitWait   = "runner-init-wait"
	StageExec       = "runner-exec"
)
