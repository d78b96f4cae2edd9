package chain

// The runner chain's stages, each named for the subcommand that runs it
// (package stage's Stages says what each does).
const (
	StageOuter      = "runner-outer"
	StageOuterWait  = "runner-outer-wait"
	StageInner      = "runner-inner"
	StageInnerChild = "runner-inner-child"
	StageInitWait   = "runner-init-wait"
	StageExec       = "runner-exec"
)

// StageEnv is every stage's environment. One P: a stage mostly waits, and
// each P costs an idle run memory (its caches, another thread) for as
// long as the run lives (docs/benchmarks-log.md, "Density").
var StageEnv = []string{"GOMAXPROCS=1"}

// ReadyFDEnv names the descriptor on which runner-outer reports readiness
// to its spawner: ReadyOK, or an error message, then it closes it.
const ReadyFDEnv = "BATON_RUNNER_READY_FD"

// ReadyOK is a runner's "ready": on the readiness pipe, and on the pool
// socket as its answer to a take.
const ReadyOK = "ok"

// PoolFDEnv names runner-outer's end of a prestarted chain's socket.
const PoolFDEnv = "BATON_RUNNER_POOL_FD"

// The pool socket's messages: runner-outer says PoolReady once it waits
// for a take, the worker sends TakeWord with the run's spec, journal and
// input (SCM_RIGHTS), and runner-outer answers ReadyOK or "error: why".
const PoolReady = "ready"

// GitClonePhase is the phase of the state record (state.ndjson) whose
// detail is the commit the exec stage cloned into the workspace before the
// agent started: written by the init, which the agent cannot reach, it is
// the diff's baseline.
const GitClonePhase = "git-clone"

// PoolWaitPhase is the phase of the state record (state.ndjson) a
// prestarted chain's init writes once its exec stage waits for the take:
// nothing is left to do before one (the worker's side looks for it).
const PoolWaitPhase = "exec-stage"
