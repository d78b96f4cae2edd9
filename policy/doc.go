// Package policy owns what baton decides about an agent's permission
// prompts: a profile's (or a job's) rules of allow, ask and deny, matched
// against a tool and what it acts on, and the prompts themselves as the
// agents print them (Claude Code's control_request can_use_tool, Codex
// app-server's item/*/requestApproval) with the lines that answer them
// (an allow or a deny, a follow-up turn). It imports the standard library
// only: the worker, the configuration and the commands share it.
package policy
