// Package agui projects a run's chain onto AG-UI events (the protocol of
// @ag-ui/core 1.0), so that any AG-UI client reads any agent baton runs:
// Claude Code, Codex, baton's fake agent, or anything printing NDJSON.
// It imports only protocol and policy (a leaf: how a permission prompt
// reads), so the console, the client and the CLI can all use it.
//
// # A projection is a function of the chain
//
// A Projector reads the chain's messages in order (Project), each with
// its subject kind, headers, data and stream sequence, and returns the
// AG-UI events each one produces. Nothing else goes in (no clock, no
// randomness), so the same chain always gives the same events with the
// same ids: a replay, or a second viewer, sees exactly what the first did.
//
// Every event has a Position: the stream sequence of the message it came
// from (the last piece's, for a line published in chunks) and its index
// among that message's events, written "seq:index". Positions grow along
// the projection, so a Position is a resume point (an SSE event's id).
// Ids are the runId and a position, "<runId>:<seq>:<index>", of the event
// that starts what they name (a message, a tool call, a tool result, a
// later AG-UI run): unique within the run, and the same on every replay.
// The first AG-UI run of a chain is the runId itself; the threadId is the
// runId unless WithThreadID names the session.
//
// # Resuming
//
// To continue exactly after a position P, a projector needs the state the
// projection had there (the open text message, the tool calls waiting for
// results, the run that is open...). Two ways give it:
//
//   - replay: New(runID, After(P)) and feed it the chain from its start;
//     it reads every message and returns only the events after P;
//   - carry: State, taken after any message, holds all a projector keeps
//     between messages (the ids of what is open, of the tool calls waiting,
//     of the open run; a chunked line's pieces so far); Restore it into a
//     projector made with the same options plus After(P), and feed it the
//     messages after the one State was taken after.
//
// The state stays small whatever the agent prints: past 256 open streams
// the oldest is ended, past 256 tool calls waiting the oldest gets a
// result saying it got none.
//
// Both give the very events the uninterrupted projection gave after P.
// A message at or before the last one read is skipped, so overlapping
// pages of the relay are harmless.
//
// # Runs and turns
//
// An AG-UI run is one turn of the agent: it starts with RUN_STARTED and
// ends with RUN_FINISHED or RUN_ERROR, and a stream may hold several, one
// after the other. baton's statuses bound them, since they are what say
// a turn or a run is over for sure (an agent that printed its result may
// still fail, time out or be cancelled):
//
//	started                      RUN_STARTED (rawEvent: the status)
//	waiting                      CUSTOM baton.waiting, then the turn's end
//	succeeded, paused            the run's end: RUN_FINISHED, outcome success
//	cancelled                    RUN_FINISHED, outcome cancelled
//	failed, timeout, lost        RUN_ERROR (message: the reason, code: the status)
//	attached, handoff, running   CUSTOM baton.attached, baton.handoff, baton.running
//
// At an end, what is still open is ended, and a tool call still waiting
// gets a TOOL_CALL_RESULT saying it got none (metadata {"isError":true}):
// AG-UI clients take a tool call left without a result for one they must
// run themselves. The end's RUN_FINISHED (or RUN_ERROR's rawEvent)
// carries result {"status": <the status>, "turn": <the agent's turn-end
// line>} and the turn's token usage; a turn the agent reports failed is a
// RUN_ERROR (code: its subtype), and one it reports aborted, or that
// failed after an interrupt, is cancelled. paused is a success: a paused
// session only waits for its next message. An
// event with no run open (the next turn's input, a hand-off while the
// agent waits) opens one: RUN_STARTED with runId "<runId>:<position>".
// The stream so obeys @ag-ui/client's verifier: a RUN_STARTED first, none
// while a run is open, nothing after RUN_FINISHED but a RUN_STARTED.
//
// # Approvals: the interrupt outcome
//
// With a policy (issue 29), a permission prompt's chain message carries
// the approval's id, the policy's verdict and its rule (Baton-Approval,
// Baton-Verdict, Baton-Rule), and they join its CUSTOM baton.approval
// (approvalId, verdict, rule). An allow or a deny by the policy is no
// interrupt: baton answers it at once, a decision input (Baton-Input-Kind
// decision) whose CUSTOM baton.approval_answer says approvalId, decidedBy
// ("policy") and rule. A prompt whose verdict is ask stays open until a
// decision input answers it (by a person; one by "timeout" only holds
// it: the agent is told it awaits approval) or a follow-up turn
// (Baton-Input-Kind followup, CUSTOM baton.approval_followup) says a
// person allowed it after a hold. A turn that ends (waiting, paused)
// while prompts are open (or whose waiting status, reason approval,
// came just before the prompt's line: the line ends it) ends with
// RUN_FINISHED outcome
// {"type":"interrupt","interrupts":[...]}, one Interrupt per open prompt:
// id the approval's id, reason "approval", a message, the toolCallId of
// the call it is about while that waits for its result (it is not given
// a "no result" result: its result comes in a later run), a
// responseSchema ({"approved": boolean, "message": string}) and metadata
// {runId, tool, target, rule}. The client answers with the next
// RunAgentInput's resume (see the console's POST /api/agui); the answer's
// input then opens the next AG-UI run. A prompt still open at the next
// turn's end (a hold) is an interrupt again. Without a Baton-Verdict
// (no policy) nothing changes: prompts are CUSTOM baton.approval only.
//
// # Inputs and other lines
//
// Inputs (the .input messages, and the job's input given WithJobInput)
// are read whatever the dialect: a user's turn (plain text, a Claude
// stream-json user message, a Codex turn/start or turn/steer) is a text
// message with role user, which AG-UI clients show in the conversation as
// the user's; an approval's answer (a Claude control_response, a Codex
// JSON-RPC result with a decision) is CUSTOM baton.approval_answer; an
// interrupt CUSTOM baton.interrupt; baton's follow-up turn after a late
// allow CUSTOM baton.approval_followup; the end of input CUSTOM baton.eof; any
// other input (a handshake) CUSTOM baton.input. A host tool call or answer
// (.tool, docs/tools.md) is CUSTOM baton.tool, its value the chain's JSON.
// A .raw line (not JSON) is CUSTOM baton.raw {"line": ...}; an .egress
// message (a connection the sandbox's egress proxy decided) CUSTOM
// baton.egress, its value the message's JSON; a line no dialect translates is RAW,
// its source the dialect ("agent" when none). A chunked line is joined
// from its Baton-Chunk pieces; a broken or oversized one is reported as
// CUSTOM baton.error and dropped.
//
// # Dialects
//
// WithDialect names the agent's dialect (a profile's `events`). Without
// it the projector sniffs: the first events line that tells (a "type"
// Claude Code prints, a "type" starting with thread., turn. or item., or
// a JSON-RPC "method" or answer) fixes the dialect for the rest of the
// chain; lines before it are RAW.
//
// Claude Code stream-json (DialectClaude; baton's fake agent prints it):
//
//	system/init                               CUSTOM claude.init (the line)
//	stream_event content_block_start text     TEXT_MESSAGE_START (role assistant)
//	  ... thinking                            REASONING_START, REASONING_MESSAGE_START
//	  ... tool_use                            TOOL_CALL_START (parentMessageId: the
//	                                          assistant's latest text, if any since the
//	                                          last tool result)
//	stream_event text_delta, thinking_delta,  TEXT_MESSAGE_CONTENT, REASONING_MESSAGE_CONTENT,
//	  input_json_delta                        TOOL_CALL_ARGS
//	stream_event content_block_stop           TEXT_MESSAGE_END; REASONING_MESSAGE_END, REASONING_END;
//	                                          TOOL_CALL_END
//	assistant (whole message, one line per    the same events at once; when its message
//	  block)                                  came as stream_events, only a tool_use that
//	                                          did not (baton's fake agent streams text only)
//	user tool_result                          TOOL_CALL_RESULT (metadata isError when is_error)
//	result                                    the turn's end: usage per model, total_cost_usd
//	                                          and the rest in RUN_FINISHED's result.turn
//	control_request can_use_tool              CUSTOM baton.approval {dialect, requestId,
//	                                          toolCallId, toolName, input, request}, after
//	                                          the call's TOOL_CALL_* if it was not printed
//	control_cancel_request                    CUSTOM baton.approval_cancelled
//	a sub-agent's line (parent_tool_use_id),  RAW
//	  anything else
//
// Codex `exec --json` (DialectCodexExec):
//
//	thread.started                           CUSTOM codex.thread_started
//	item agent_message, reasoning            TEXT_MESSAGE_*, REASONING_* (started,
//	                                         updated and completed send what each adds)
//	item command_execution, file_change,     TOOL_CALL_START/ARGS/END when it starts
//	  mcp_tool_call, web_search, todo_list   (or completes unseen), TOOL_CALL_RESULT
//	                                         when it completes; updates skipped
//	turn.completed                           the turn's end, with its usage
//	turn.failed                              the turn's end, an error
//	turn.started, error, anything else       RAW
//
// Codex `app-server` (DialectCodexAppServer):
//
//	thread/started                           CUSTOM codex.thread_started
//	item/started, item/completed             as exec's items (agentMessage, reasoning,
//	                                         commandExecution, fileChange, mcpToolCall,
//	                                         webSearch); userMessage skipped (its
//	                                         input told it)
//	item/agentMessage/delta,                 TEXT_MESSAGE_CONTENT, REASONING_MESSAGE_CONTENT
//	  item/reasoning/summaryTextDelta, textDelta
//	*/requestApproval                        CUSTOM baton.approval
//	thread/tokenUsage/updated                summed into the turn's usage
//	turn/completed                           the turn's end (status interrupted:
//	                                         cancelled; failed: an error)
//	answers, other notifications             RAW
//
// DialectRaw translates no line: each is RAW.
package agui
