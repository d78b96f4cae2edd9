// Package escape holds the end-to-end suites of the sandbox: an agent that
// tries every way out (test/escapeagent), secrets and the host's git
// workspace kept from it, egress on the chain and capped, and the real
// agent CLIs (Claude Code, Codex) against a mock API.
package escape
