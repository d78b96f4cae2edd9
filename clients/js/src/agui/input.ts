import { DecidedByTimeout, type Decision, decision, followUp, resolve } from "./approval.js";
import { blockText } from "./claude.js";
import { EventType } from "./event.js";
import { compact, obj, omitInt, omitRaw, omitStr, parseUint64, quote, rawOut, slice, struct, unmarshal, valid } from "./json.js";
import { type Message, type Projector, header } from "./projector.js";

const HeaderInputSeq = "Baton-Input-Seq";
const HeaderInputEOF = "Baton-Input-EOF";
const HeaderInputKind = "Baton-Input-Kind";

/** input projects an input message, what was written to the agent's
 * stdin (see the Go package's input). */
export function input(p: Projector, m: Message, data: string): void {
  const seq = parseUint64(header(m, HeaderInputSeq)).v;
  let d: Decision | null = null;
  switch (header(m, HeaderInputKind)) {
    case "interrupt":
      p.st.interrupted = true;
      p.custom("baton.interrupt", inputValue(seq, null));
      return;
    case "followup":
      followUp(p, data.endsWith("\n") ? data.slice(0, -1) : data, seq);
      return;
    case "decision":
      d = decision(p);
      break;
  }
  const line = data.endsWith("\n") ? data.slice(0, -1) : data;
  if (line.length > 0) echo(p, line, seq, d);
  // Answered; a hold leaves the prompt open for a person.
  if (d !== null && d.decidedBy !== DecidedByTimeout) resolve(p, d.approvalId);
  if (header(m, HeaderInputEOF) === "true") p.custom("baton.eof", inputValue(seq, null));
}

/** jobEcho echoes the job's input: one input per line when every line
 * is JSON, else one text. */
export function jobEcho(p: Projector, input: string): void {
  if (input.endsWith("\n")) input = input.slice(0, -1);
  const lines = input.split("\n");
  for (const l of lines) {
    if (!valid(l)) {
      echo(p, input, 0n, null);
      return;
    }
  }
  for (const l of lines) echo(p, l, 0n, null);
}

function inputValue(seq: bigint, input: string | null): string {
  return obj([
    ["inputSeq", omitInt(seq)],
    ["input", omitRaw(input)],
  ]);
}

const inputLine = struct({
  type: "s",
  message: struct({ content: "r" }),
  method: "s",
  params: struct({ input: slice(struct({ type: "s", text: "s" })) }),
  id: "r",
  result: struct({ Decision: "r" }),
  response: struct({
    request_id: "s",
    response: struct({ behavior: "s", message: "s" }),
  }),
});

/** echo projects one input, whatever the dialect. */
function echo(p: Projector, line: string, seq: bigint, d: Decision | null): void {
  if (!valid(line)) {
    userText(p, line);
    return;
  }
  const { v: inp, ok } = unmarshal(line, inputLine);
  if (ok) {
    if (inp.type === "user") {
      const text = blockText(inp.message.content);
      if (text !== "") {
        userText(p, text);
        return;
      }
    } else if (inp.method === "turn/start" || inp.method === "turn/steer") {
      const texts: string[] = [];
      for (const i of inp.params.input ?? []) if (i.type === "text") texts.push(i.text);
      const text = texts.join("\n");
      if (text !== "") {
        userText(p, text);
        return;
      }
    } else if (inp.type === "control_response" && inp.response.response.behavior !== "") {
      p.custom(
        "baton.approval_answer",
        answer(seq, quote(inp.response.request_id), inp.response.response.behavior, inp.response.response.message, d),
      );
      return;
    } else if (inp.method === "" && inp.id !== null && inp.result.Decision !== null) {
      const ds = unmarshal<string>(inp.result.Decision, "s");
      const verdict = ds.ok ? ds.v : compact(inp.result.Decision);
      p.custom("baton.approval_answer", answer(seq, compact(inp.id), verdict, "", d));
      return;
    }
  }
  p.custom("baton.input", inputValue(seq, compact(line)));
}

function answer(seq: bigint, requestId: string, decision: string, message: string, d: Decision | null): string {
  return obj([
    ["inputSeq", omitInt(seq)],
    ["requestId", rawOut(requestId)],
    ["decision", quote(decision)],
    ["message", omitStr(message)],
    ["approvalId", omitStr(d?.approvalId)],
    ["decidedBy", omitStr(d?.decidedBy)],
    ["rule", omitStr(d?.rule)],
  ]);
}

/** userText emits text as a user's message. */
function userText(p: Projector, text: string): void {
  const id = p.newID();
  p.emit({ type: EventType.TextMessageStart, messageId: id, role: "user" });
  p.emit({ type: EventType.TextMessageContent, messageId: id, delta: text });
  p.emit({ type: EventType.TextMessageEnd, messageId: id });
}
