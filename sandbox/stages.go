package sandbox

import "github.com/batonhq/baton/sandbox/internal/chain"

// The runner chain's stages, each named for the subcommand that runs it
// (Stages, in stages_linux.go, says what each does).
const (
	StageOuter      = chain.StageOuter
	StageOuterWait  = chain.StageOuterWait
	StageInner      = chain.StageInner
	StageInnerChild = chain.StageInnerChild
	StageInitWait   = chain.StageInitWait
	StageExec       = chain.StageExec
)
