package config_test

import (
	"fmt"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/protocol"
)

func ExampleConfig_Resolve() {
	cfg, err := config.Parse([]byte(`
profiles:
  claude:
    command: [claude, -p, --output-format, stream-json, --verbose]
    allowEnv: [ANTHROPIC_MODEL]
    timeout: 30m
    network: {allow: [api.anthropic.com]}
`))
	if err != nil {
		panic(err)
	}
	job, err := protocol.DecodeJob([]byte(`{"runId":"r1","profile":"claude","input":"hi","env":{"ANTHROPIC_MODEL":"opus"},"timeout":"5m"}`), "", cfg.Limits())
	if err != nil {
		panic(err)
	}
	inv, err := cfg.Resolve(job, "/usr/local/bin/baton")
	if err != nil {
		panic(err)
	}
	fmt.Println(inv.Argv)
	fmt.Println(inv.Env)
	fmt.Println(inv.Timeout, inv.Network.Allow)

	_, err = cfg.Resolve(protocol.Job{RunID: "r2", Profile: "claude", Timeout: protocol.Duration(2 * 3600e9)}, "")
	fmt.Println(protocol.ReasonOf(err), err)
	// Output:
	// [claude -p --output-format stream-json --verbose]
	// [ANTHROPIC_MODEL=opus LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin]
	// 5m0s [api.anthropic.com]
	// not_allowed timeout 2h0m0s exceeds profile "claude" limit of 30m0s
}

func ExampleParse_errors() {
	_, err := config.Parse([]byte(`
concurency: 8
profiles:
  claude:
    command: []
    timeout: 30
`))
	fmt.Println(err)
	// Output:
	// line 2: unknown key "concurency" in the configuration (known keys: prefix, leaseTTL, concurrency, replicas, eventsMaxAge, outputsMaxAge, workspacesMaxAge, maxWorkspaceBytes, maxWorkspaceEntries, workspacesMaxBytes, runRetention, recordRetention, maxJobBytes, sandboxUID, cgroupParent, eventsMaxBytes, jobsMaxBytes, jobsMaxMsgs, dlqMaxBytes, dlqMaxMsgs, maxInputBytes, diskBudget, diskReserve, sessionsMaxAge, checkpointsMaxBytes, tenantLabel, keyConcurrency, keyWeights, profiles)
	// line 6: want a duration with a unit, like "15s" or "1h", got 30 (int)
}
