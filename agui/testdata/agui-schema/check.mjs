// Checks golden AG-UI streams (lines of {"id", "event"}) against the
// official packages: every event parses with @ag-ui/core's EventSchema,
// and each file, as one stream, passes @ag-ui/client's verifyEvents (the
// checks HttpAgent runs on what a server sends), then builds messages
// with its defaultApplyEvents. Prints one line per file; exits 1 on the
// first failure, saying where.
import { readFileSync } from "node:fs";
import { EventSchema } from "@ag-ui/core/schemas";
import { verifyEvents, defaultApplyEvents } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";

let failed = false;
for (const file of process.argv.slice(2)) {
  const lines = readFileSync(file, "utf8").split("\n").filter((l) => l !== "");
  const events = [];
  for (const [i, line] of lines.entries()) {
    const { id, event } = JSON.parse(line);
    const r = EventSchema.safeParse(event);
    if (!r.success) {
      console.error(`${file}:${i + 1} (${id}): ${event.type} does not parse with @ag-ui/core's EventSchema: ${r.error.message}`);
      failed = true;
    }
    events.push(event);
  }
  try {
    await lastValueFrom(verifyEvents()(from(events)).pipe(toArray()));
  } catch (e) {
    console.error(`${file}: @ag-ui/client's verifyEvents refuses the stream: ${e.message}`);
    failed = true;
    continue;
  }
  // What a client makes of it: the messages of the conversation.
  const input = { threadId: "t", runId: "r", messages: [], tools: [], context: [], state: {}, forwardedProps: {} };
  const agent = { messages: [], state: {} };
  let messages = [];
  try {
    const states = await lastValueFrom(defaultApplyEvents(input, from(events), agent, []).pipe(toArray()));
    for (const s of states) if (s.messages) messages = s.messages;
  } catch (e) {
    console.error(`${file}: @ag-ui/client's defaultApplyEvents fails: ${e.message}`);
    failed = true;
    continue;
  }
  const roles = {};
  for (const m of messages) roles[m.role] = (roles[m.role] ?? 0) + 1;
  const calls = messages.reduce((n, m) => n + (m.toolCalls?.length ?? 0), 0);
  console.log(`${file}: ${events.length} events, messages ${JSON.stringify(roles)}, tool calls ${calls}`);
}
process.exit(failed ? 1 : 0);
