import { prompt } from "./approval.js";
import { DialectClaude } from "./dialect.js";
import { type Usage, usage } from "./event.js";
import { byteOrder, compact, map, obj, omitRaw, omitStr, ptr, quote, rawOut, slice, struct, unmarshal, valid } from "./json.js";
import { type Projector, type Turn, newTurn } from "./projector.js";

const claudeBlock = struct({
  type: "s",
  text: "s",
  thinking: "s",
  id: "s",
  name: "s",
  input: "r",
  tool_use_id: "s",
  content: "r",
  is_error: "b",
});

const claudeStreamEvent = struct({
  type: "s",
  index: "i",
  message: ptr(struct({ id: "s" })),
  content_block: ptr(claudeBlock),
  delta: ptr(struct({ type: "s", text: "s", thinking: "s", partial_json: "s" })),
});

const claudeLine = struct({
  type: "s",
  subtype: "s",
  parent_tool_use_id: ptr("s"),
  event: ptr(claudeStreamEvent),
  message: ptr(struct({ id: "s", content: "r" })),
  is_error: "b",
  result: "r",
  errors: slice("s"),
  terminal_reason: "s",
  usage: ptr(
    struct({ input_tokens: "i", cache_creation_input_tokens: "i", cache_read_input_tokens: "i", output_tokens: "i" }),
  ),
  modelUsage: map(struct({ inputTokens: "i", outputTokens: "i", cacheReadInputTokens: "i", cacheCreationInputTokens: "i" })),
  request_id: "s",
  request: ptr(struct({ subtype: "s", tool_name: "s", input: "r", tool_use_id: "s" })),
});

const src = DialectClaude;

/** claude projects a Claude Code stream-json line (see doc.go's table). */
export function claude(p: Projector, line: string): void {
  const { v: l, ok } = unmarshal(line, claudeLine);
  if (!ok || (l.parent_tool_use_id !== null && l.parent_tool_use_id !== "")) {
    // A sub-agent's lines are its own conversation: passed on as they are.
    p.raw(line, src);
    return;
  }
  if (l.type === "system" && l.subtype === "init") {
    p.custom("claude.init", compact(line));
  } else if (l.type === "stream_event" && l.event !== null) {
    claudeStream(p, l.event, line);
  } else if (l.type === "assistant" && l.message !== null) {
    claudeAssistant(p, l.message.id, l.message.content, line);
  } else if (l.type === "user" && l.message !== null) {
    claudeUser(p, l.message.content, line);
  } else if (l.type === "result") {
    p.turnEnd(line, claudeTurn(l));
  } else if (l.type === "control_request" && l.request !== null && l.request.subtype === "can_use_tool") {
    const r = l.request;
    if (r.tool_use_id !== "" && p.toolID(r.tool_use_id) === "") {
      // Asked before its tool_use was printed: the prompt is the call's
      // only account.
      p.tool(r.tool_use_id, r.tool_name, orEmptyObject(r.input));
    }
    prompt(
      p,
      { dialect: src, requestId: quote(l.request_id), toolCallId: p.toolID(r.tool_use_id), toolName: r.tool_name, input: r.input, request: compact(line) },
      line,
    );
  } else if (l.type === "control_cancel_request") {
    p.custom("baton.approval_cancelled", obj([["requestId", quote(l.request_id)]]));
  } else {
    p.raw(line, src);
  }
}

export function orEmptyObject(v: string | null): string {
  if (!v || !valid(v)) return "{}";
  return compact(v);
}

function claudeStream(p: Projector, e: any, line: string): void {
  const key = "block:" + String(e.index);
  switch (e.type) {
    case "message_start":
      endBlocks(p);
      p.st.msg = "";
      p.st.streamed = true;
      p.st.parent = "";
      if (e.message !== null) p.st.msg = e.message.id;
      break;
    case "content_block_start": {
      const b = e.content_block;
      if (b === null) break;
      p.end(key);
      switch (b.type) {
        case "text":
          p.delta(p.startText(key), b.text);
          break;
        case "thinking":
          p.delta(p.startReasoning(key), b.thinking);
          break;
        case "tool_use":
        case "server_tool_use":
        case "mcp_tool_use":
          p.startTool(key, b.id, b.name);
          break;
        default:
          p.raw(line, src);
      }
      break;
    }
    case "content_block_delta": {
      const o = p.open(key);
      if (!o || e.delta === null) break;
      switch (e.delta.type) {
        case "text_delta":
          p.delta(o, e.delta.text);
          break;
        case "thinking_delta":
          p.delta(o, e.delta.thinking);
          break;
        case "input_json_delta":
          p.delta(o, e.delta.partial_json);
          break;
      }
      break;
    }
    case "content_block_stop":
      p.end(key);
      break;
    case "message_delta":
    case "message_stop":
      break;
    default:
      p.raw(line, src);
  }
}

/** endBlocks ends what a partial message left open. */
function endBlocks(p: Projector): void {
  for (let i = 0; i < p.st.open.length; ) {
    if (p.st.open[i]!.key.startsWith("block:")) {
      p.end(p.st.open[i]!.key);
      continue;
    }
    i++;
  }
}

function claudeAssistant(p: Projector, id: string, content: string | null, line: string): void {
  const streamed = p.st.streamed && id === p.st.msg;
  if (!streamed && (id !== p.st.msg || p.st.streamed)) {
    p.st.msg = id;
    p.st.streamed = false;
    p.st.parent = "";
  }
  const { v: blocks, ok } = unmarshal<any[] | null>(content ?? "", slice(claudeBlock));
  if (!ok) {
    p.raw(line, src);
    return;
  }
  for (const b of blocks ?? []) {
    switch (b.type) {
      case "text": {
        if (streamed || b.text === "") continue;
        const e = p.startText("whole");
        p.delta(e, b.text);
        p.end("whole");
        break;
      }
      case "thinking": {
        if (streamed || b.thinking === "") continue;
        const e = p.startReasoning("whole");
        p.delta(e, b.thinking);
        p.end("whole");
        break;
      }
      case "tool_use":
      case "server_tool_use":
      case "mcp_tool_use":
        if (streamed && p.known(b.id)) continue;
        p.tool(b.id, b.name, orEmptyObject(b.input));
        break;
    }
  }
}

function claudeUser(p: Projector, content: string | null, line: string): void {
  const { v: blocks } = unmarshal<any[] | null>(content ?? "", slice(claudeBlock));
  let results = 0;
  for (const b of blocks ?? []) {
    if (b.type === "tool_result") {
      results++;
      p.result(b.tool_use_id, blockText(b.content), b.is_error, line, src);
    }
  }
  if (results === 0) p.raw(line, src);
}

const blockTexts = slice(struct({ type: "s", text: "s" }));

/** blockText is the text of Anthropic message content: a string, or the
 * text blocks of an array, joined by newlines. */
export function blockText(content: string | null): string {
  const s = unmarshal<string>(content ?? "", "s");
  if (s.ok) return s.v;
  const { v: blocks } = unmarshal<any[] | null>(content ?? "", blockTexts);
  const texts: string[] = [];
  for (const b of blocks ?? []) if (b.type === "text" && b.text !== "") texts.push(b.text);
  return texts.join("\n");
}

function claudeTurn(l: any): Turn {
  const t = newTurn({ cancelled: l.terminal_reason.startsWith("aborted") });
  if (l.is_error && l.subtype !== "error_max_turns") {
    t.code = l.subtype;
    const r = unmarshal<string>(l.result ?? "", "s");
    const s = r.v;
    if (l.errors !== null && l.errors.length > 0) t.error = l.errors.join("; ");
    else if (s !== "") t.error = s;
    else t.error = l.subtype;
    if (t.error === "") t.error = "the turn failed";
  }
  const models: Map<string, any> | null = l.modelUsage;
  const us: Usage[] = [];
  if (models) {
    for (const m of [...models.keys()].sort(byteOrder)) {
      const u = models.get(m);
      us.push(anthropicUsage(m, u.inputTokens, u.cacheReadInputTokens, u.cacheCreationInputTokens, u.outputTokens));
    }
  }
  if (us.length > 0) t.usage = us;
  if (us.length === 0 && l.usage !== null) {
    const u = l.usage;
    t.usage = [anthropicUsage("", u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens, u.output_tokens)];
  }
  return t;
}

const wrap = (n: bigint) => BigInt.asIntN(64, n);

function anthropicUsage(model: string, input: bigint, cacheRead: bigint, cacheWrite: bigint, output: bigint): Usage {
  const inTokens = wrap(input + cacheRead + cacheWrite);
  return usage({
    provider: "anthropic",
    model,
    inputTokens: inTokens,
    outputTokens: output,
    totalTokens: wrap(inTokens + output),
    cachedInputTokens: cacheRead,
    cacheWriteInputTokens: cacheWrite,
  });
}
