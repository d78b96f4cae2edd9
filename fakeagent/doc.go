// Package fakeagent owns baton's stand-in for an AI agent CLI: a program that
// writes a realistic NDJSON stream, modelled on Claude Code's
// `--output-format stream-json --include-partial-messages`, at a chosen rate
// and line size, and then ends the way a test asks (exit code, signal, stderr
// text). The demo, the tests and the benchmarks run it as `baton fake-agent`.
//
// The stream is a pure function of the Options (and of stdin with EchoInput):
// the same Seed gives the same bytes, with no wall-clock time in them. It
// starts with a system/init event, goes through turns of stream_event text
// deltas, assistant tool_use messages (Bash, Read, Edit, Grep) and user
// tool_result messages, and ends with a result event. Every line goes out in
// one Write, so a reader of the journal sees lines arrive whole.
package fakeagent
