import { prompt } from "./approval.js";
import { orEmptyObject } from "./claude.js";
import { DialectCodexAppServer, DialectCodexExec } from "./dialect.js";
import { addUsage, usage } from "./event.js";
import { fnvAdd, fnvOffset } from "./fnv.js";
import { utf8Encoder } from "./text.js";
import { compact, goString, obj, ptr, rawOut, slice, strMap, struct, unmarshal, valid } from "./json.js";
import { type Entity, type Kind, type Projector, newTurn } from "./projector.js";

/** item is a Codex item, from either dialect, in the terms the
 * projection needs. */
interface Item {
  id: string;
  kind: Kind | "";
  text: string;
  name: string;
  args: string;
  output: string;
  failed: boolean;
}

function newItem(it: Partial<Item>): Item {
  return { id: "", kind: "", text: "", name: "", args: "", output: "", failed: false, ...it };
}

function itemStarted(p: Projector, it: Item, line: string, source: string): void {
  const key = "item:" + it.id;
  switch (it.kind) {
    case "text":
    case "reasoning":
      itemText(p, it, key);
      break;
    case "tool":
      if (p.toolID(it.id) === "") p.tool(it.id, it.name, it.args);
      break;
    default:
      p.raw(line, source);
  }
}


/** itemText sends what a text or reasoning item holds beyond what was
 * sent, opening it first. */
function itemText(p: Projector, it: Item, key: string): Entity {
  let e = p.open(key);
  if (!e) e = it.kind === "text" ? p.startText(key) : p.startReasoning(key);
  // it.text comes from JSON: valid UTF-8, no lone surrogates.
  const b = utf8Encoder.encode(it.text);
  if (b.length > e.sent && fnvAdd(fnvOffset, b.subarray(0, e.sent)) === e.sum) {
    e = p.send(key, goString(b.subarray(e.sent)));
  }
  return e;
}

function itemDelta(p: Projector, id: string, k: Kind, delta: string): void {
  const key = "item:" + id;
  if (!p.open(key)) itemText(p, newItem({ id, kind: k }), key);
  p.send(key, delta);
}

function itemCompleted(p: Projector, it: Item, line: string, source: string): void {
  const key = "item:" + it.id;
  switch (it.kind) {
    case "text":
    case "reasoning":
      itemText(p, it, key);
      p.end(key);
      break;
    case "tool":
      itemStarted(p, it, line, source);
      p.result(it.id, it.output, it.failed, line, source);
      break;
    default:
      p.raw(line, source);
  }
}

const errorMessage = ptr(struct({ message: "s" }));

const codexExecItem = struct({
  id: "s",
  type: "s",
  text: "s",
  command: "s",
  aggregated_output: "s",
  exit_code: ptr("i"),
  status: "s",
  changes: "r",
  server: "s",
  tool: "s",
  arguments: "r",
  result: "r",
  error: errorMessage,
  query: "s",
  items: "r",
});

const codexExecLine = struct({
  type: "s",
  item: ptr(codexExecItem),
  usage: ptr(
    struct({
      input_tokens: "i",
      cached_input_tokens: "i",
      cache_write_input_tokens: "i",
      output_tokens: "i",
      reasoning_output_tokens: "i",
    }),
  ),
  error: errorMessage,
});

/** codexExec projects a `codex exec --json` line. */
export function codexExec(p: Projector, line: string): void {
  const src = DialectCodexExec;
  const { v: l, ok } = unmarshal(line, codexExecLine);
  if (!ok) {
    p.raw(line, src);
    return;
  }
  if (l.type === "thread.started") {
    p.custom("codex.thread_started", compact(line));
  } else if (
    (l.type === "item.started" || l.type === "item.updated" || l.type === "item.completed") &&
    l.item !== null &&
    l.item.id !== ""
  ) {
    const it = execItem(l.item);
    if (l.type === "item.completed") itemCompleted(p, it, line, src);
    else if (it.kind === "tool" && l.type === "item.updated") {
      // A tool's interim state: its result comes when it completes.
    } else itemStarted(p, it, line, src);
  } else if (l.type === "turn.completed") {
    const t = newTurn();
    const u = l.usage;
    if (u !== null) {
      t.usage = [
        usage({
          provider: "openai",
          inputTokens: u.input_tokens,
          outputTokens: u.output_tokens,
          totalTokens: BigInt.asIntN(64, u.input_tokens + u.output_tokens),
          reasoningTokens: u.reasoning_output_tokens,
          cachedInputTokens: u.cached_input_tokens,
          cacheWriteInputTokens: u.cache_write_input_tokens,
        }),
      ];
    }
    p.turnEnd(line, t);
  } else if (l.type === "turn.failed") {
    const t = newTurn({ code: "turn.failed", error: "the turn failed" });
    if (l.error !== null && l.error.message !== "") t.error = l.error.message;
    p.turnEnd(line, t);
  } else {
    p.raw(line, src);
  }
}

function execItem(c: any): Item {
  const it = newItem({ id: c.id, text: c.text, kind: "tool" });
  switch (c.type) {
    case "agent_message":
      it.kind = "text";
      break;
    case "reasoning":
      it.kind = "reasoning";
      break;
    case "command_execution":
      it.name = "shell";
      it.args = strMap({ command: c.command });
      it.output = c.aggregated_output;
      it.failed = c.status === "failed" || c.status === "declined" || (c.exit_code !== null && c.exit_code !== 0n);
      break;
    case "file_change":
      it.name = "file_change";
      it.args = objectOf("changes", c.changes);
      it.output = changesText(c.changes) + c.status;
      it.failed = c.status === "failed";
      break;
    case "mcp_tool_call":
      it.name = c.server + "." + c.tool;
      it.args = orEmptyObject(c.arguments);
      it.output = mcpText(c.result);
      it.failed = c.status === "failed" || c.error !== null;
      if (c.error !== null) it.output = c.error.message;
      break;
    case "web_search":
      it.name = "web_search";
      it.args = strMap({ query: c.query });
      break;
    case "todo_list":
      it.name = "todo_list";
      it.args = objectOf("items", c.items);
      it.output = todoText(c.items);
      break;
    default:
      it.kind = "";
  }
  return it;
}

const codexAppItem = struct({
  id: "s",
  type: "s",
  text: "s",
  summary: "r",
  content: "r",
  command: "s",
  aggregatedOutput: ptr("s"),
  exitCode: ptr("i"),
  status: "s",
  changes: "r",
  server: "s",
  tool: "s",
  arguments: "r",
  result: "r",
  error: errorMessage,
  query: "s",
});

const codexAppLine = struct({
  method: "s",
  id: "r",
  params: struct({
    item: ptr(codexAppItem),
    itemId: "s",
    delta: "s",
    turn: ptr(struct({ status: "s", error: errorMessage })),
    tokenUsage: ptr(
      struct({
        last: struct({
          inputTokens: "i",
          cachedInputTokens: "i",
          cacheWriteInputTokens: "i",
          outputTokens: "i",
          reasoningOutputTokens: "i",
          totalTokens: "i",
        }),
      }),
    ),
  }),
});

/** codexApp projects a `codex app-server` JSON-RPC message. */
export function codexApp(p: Projector, line: string): void {
  const src = DialectCodexAppServer;
  const { v: l, ok } = unmarshal(line, codexAppLine);
  if (!ok) {
    p.raw(line, src);
    return;
  }
  const m: string = l.method;
  const params = l.params;
  if (m === "thread/started") {
    p.custom("codex.thread_started", compact(line));
  } else if ((m === "item/started" || m === "item/completed") && params.item !== null && params.item.id !== "") {
    const it = appItem(params.item);
    if (params.item.type === "userMessage") {
      // The user's turn: its input on the chain told it.
    } else if (m === "item/completed") itemCompleted(p, it, line, src);
    else itemStarted(p, it, line, src);
  } else if (m === "item/agentMessage/delta" && params.itemId !== "") {
    itemDelta(p, params.itemId, "text", params.delta);
  } else if ((m === "item/reasoning/summaryTextDelta" || m === "item/reasoning/textDelta") && params.itemId !== "") {
    itemDelta(p, params.itemId, "reasoning", params.delta);
  } else if (
    m === "item/commandExecution/outputDelta" ||
    m === "item/fileChange/outputDelta" ||
    m === "item/reasoning/summaryPartAdded"
  ) {
    // Told whole when the item completes.
  } else if (m.endsWith("requestApproval") && l.id !== null) {
    prompt(
      p,
      { dialect: src, requestId: compact(l.id), toolCallId: p.toolID(params.itemId), toolName: approvalTool(m), input: null, request: compact(line) },
      line,
    );
  } else if (m === "thread/tokenUsage/updated" && params.tokenUsage !== null) {
    const u = params.tokenUsage.last;
    if (p.st.turn === null) p.st.turn = newTurn();
    if (p.st.turn.usage === null || p.st.turn.usage.length === 0) p.st.turn.usage = [usage({ provider: "openai" })];
    addUsage(
      p.st.turn.usage[0]!,
      usage({
        inputTokens: u.inputTokens,
        outputTokens: u.outputTokens,
        totalTokens: u.totalTokens,
        reasoningTokens: u.reasoningOutputTokens,
        cachedInputTokens: u.cachedInputTokens,
        cacheWriteInputTokens: u.cacheWriteInputTokens,
      }),
    );
  } else if (m === "turn/completed" && params.turn !== null) {
    const t = newTurn({ cancelled: params.turn.status === "interrupted" });
    if (params.turn.status === "failed") {
      t.code = "failed";
      t.error = "the turn failed";
      const e = params.turn.error;
      if (e !== null && e.message !== "") t.error = e.message;
    }
    p.turnEnd(line, t);
  } else {
    p.raw(line, src);
  }
}

function approvalTool(method: string): string {
  if (method.startsWith("item/commandExecution/")) return "shell";
  if (method.startsWith("item/fileChange/")) return "file_change";
  return "";
}

function appItem(c: any): Item {
  const it = newItem({ id: c.id, kind: "tool" });
  switch (c.type) {
    case "agentMessage":
      it.kind = "text";
      it.text = c.text;
      break;
    case "reasoning":
      it.kind = "reasoning";
      it.text = joinStrings(c.summary);
      if (it.text === "") it.text = joinStrings(c.content);
      break;
    case "commandExecution":
      it.name = "shell";
      it.args = strMap({ command: c.command });
      if (c.aggregatedOutput !== null) it.output = c.aggregatedOutput;
      it.failed = c.status === "failed" || c.status === "declined" || (c.exitCode !== null && c.exitCode !== 0n);
      if (c.status === "declined" && it.output === "") it.output = "declined";
      break;
    case "fileChange":
      it.name = "file_change";
      it.args = objectOf("changes", c.changes);
      it.output = changesText(c.changes) + c.status;
      it.failed = c.status === "failed" || c.status === "declined";
      break;
    case "mcpToolCall":
      it.name = c.server + "." + c.tool;
      it.args = orEmptyObject(c.arguments);
      it.output = mcpText(c.result);
      it.failed = c.status === "failed" || c.error !== null;
      if (c.error !== null) it.output = c.error.message;
      break;
    case "webSearch":
      it.name = "web_search";
      it.args = strMap({ query: c.query });
      break;
    default:
      it.kind = "";
  }
  return it;
}

/** joinStrings joins a JSON array's strings with blank lines. */
function joinStrings(v: string | null): string {
  const { v: ss } = unmarshal<string[] | null>(v ?? "", slice("s"));
  return (ss ?? []).join("\n\n");
}

/** objectOf is {"<key>": v}, v being null when absent or not JSON. */
function objectOf(key: string, v: string | null): string {
  if (!v || !valid(v)) v = "null";
  return obj([[key, rawOut(compact(v))]]);
}

const changesType = slice(struct({ path: "s", kind: "r" }));
const kindObject = struct({ Type: "s" });

/** changesText lists a file change's paths, one per line, each after its
 * kind (a string, or an object's type). */
function changesText(changes: string | null): string {
  const { v: cs } = unmarshal<any[] | null>(changes ?? "", changesType);
  let out = "";
  for (const c of cs ?? []) {
    const s = unmarshal<string>(c.kind ?? "", "s");
    let k = s.v;
    if (!s.ok) k = unmarshal<any>(c.kind ?? "", kindObject).v.Type;
    out += k + " " + c.path + "\n";
  }
  return out;
}

const mcpResult = struct({ content: slice(struct({ type: "s", text: "s" })) });

/** mcpText is the text of an MCP tool's result content. */
function mcpText(result: string | null): string {
  const { v: r, ok } = unmarshal<any>(result ?? "", mcpResult);
  if (!ok) return "";
  const texts: string[] = [];
  for (const c of r.content ?? []) if (c.type === "text") texts.push(c.text);
  return texts.join("\n");
}

const todoItems = slice(struct({ text: "s", completed: "b" }));

/** todoText lists a todo list's items as "[x] text" lines. */
function todoText(items: string | null): string {
  const { v: is } = unmarshal<any[] | null>(items ?? "", todoItems);
  let out = "";
  for (const i of is ?? []) out += "[" + (i.completed ? "x" : " ") + "] " + i.text + "\n";
  return out;
}
