// Approvals (see the Go package's approval.go): a permission prompt of a
// run whose profile has a policy carries the approval's id, the policy's
// verdict and its rule; one the policy asks a person about stays open
// until a decision input (not the timeout's hold) or a follow-up turn
// answers it, and a turn that ends while one is open ends with the
// interrupt outcome.
import { compact, obj, omitInt, omitRaw, omitStr, parse, quote, rawOut, slice, struct, unmarshal, valid } from "./json.js";
import { type Projector, header } from "./projector.js";

export const HeaderApproval = "Baton-Approval";
export const HeaderVerdict = "Baton-Verdict";
export const HeaderRule = "Baton-Rule";
export const HeaderDecidedBy = "Baton-Decided-By";
/** DecidedByTimeout: the askTimeout's hold, not an answer. */
export const DecidedByTimeout = "timeout";
/** ReasonApproval is an approval interrupt's reason. */
export const ReasonApproval = "approval";
const maxPending = 256;

/** The fields of a CUSTOM baton.approval a dialect reads off the prompt. */
export interface ApprovalFields {
  dialect: string;
  requestId: string;
  toolCallId: string;
  toolName: string;
  input: string | null;
  request: string;
}

function hdr(p: Projector, key: string): string {
  return p.msg ? header(p.msg, key) : "";
}

/** prompt emits a permission prompt's CUSTOM baton.approval, with the
 * verdict of the run's policy when its message has one, and keeps an ask
 * open. */
export function prompt(p: Projector, a: ApprovalFields, line: string): void {
  const approvalId = hdr(p, HeaderApproval);
  const verdict = hdr(p, HeaderVerdict);
  const rule = verdict !== "" ? hdr(p, HeaderRule) : "";
  p.custom(
    "baton.approval",
    obj([
      ["dialect", quote(a.dialect)],
      ["requestId", rawOut(a.requestId)],
      ["approvalId", omitStr(approvalId)],
      ["verdict", omitStr(verdict)],
      ["rule", omitStr(rule)],
      ["toolCallId", omitStr(a.toolCallId)],
      ["toolName", omitStr(a.toolName)],
      ["input", omitRaw(a.input)],
      ["request", rawOut(a.request)],
    ]),
  );
  if (verdict !== "ask" || approvalId === "") return;
  resolve(p, approvalId);
  const [tool, target] = promptAsks(line);
  p.st.asks.push({ id: approvalId, tool, target, rule, call: a.toolCallId });
  if (p.st.asks.length > maxPending) p.st.asks.shift();
  const raw = p.st.askWait;
  if (raw !== null) {
    // The turn's waiting status came first.
    const { v } = unmarshal(raw, struct({ status: "s", reason: "s" }));
    p.closeRun(v.status, v.reason, raw);
  }
}

/** resolve closes the ask of approval id, if open. */
export function resolve(p: Projector, id: string): void {
  const i = p.st.asks.findIndex((a) => a.id === id);
  if (i >= 0) p.st.asks.splice(i, 1);
}

/** asked reports whether an open ask is about the AG-UI tool call id. */
export function asked(p: Projector, id: string): boolean {
  return p.st.asks.some((a) => a.call === id);
}

const approvalSchema = `{"type":"object","properties":{"approved":{"type":"boolean"},"message":{"type":"string"}},"required":["approved"]}`;

/** interrupts are the open asks as the interrupt outcome's interrupts
 * (a JSON array). */
export function interrupts(p: Projector): string {
  const out = p.st.asks.map((a) => {
    const call = a.call !== "" && p.st.pending.some((e) => e.id === a.call) ? a.call : "";
    const meta = obj([
      ["runId", quote(p.runId)],
      ["tool", omitStr(a.tool)],
      ["target", omitStr(a.target)],
      ["rule", omitStr(a.rule)],
    ]);
    return obj([
      ["id", quote(a.id)],
      ["reason", quote(ReasonApproval)],
      ["message", omitStr(askMessage(a.tool, a.target, a.rule))],
      ["toolCallId", omitStr(call)],
      ["responseSchema", approvalSchema],
      ["metadata", meta],
    ]);
  });
  return "[" + out.join(",") + "]";
}

function askMessage(tool: string, target: string, rule: string): string {
  let what = tool === "" ? "the tool" : tool;
  if (target !== "") what += ": " + target;
  let msg = "Allow " + what + "?";
  if (rule !== "") msg += " (" + rule + ")";
  return msg;
}

/** Decision is who decided a decision or follow-up input. */
export interface Decision {
  approvalId: string;
  decidedBy: string;
  rule: string;
}

export function decision(p: Projector): Decision {
  return { approvalId: hdr(p, HeaderApproval), decidedBy: hdr(p, HeaderDecidedBy), rule: hdr(p, HeaderRule) };
}

/** followUp projects baton's follow-up turn after a late allow. */
export function followUp(p: Projector, line: string, seq: bigint): void {
  const d = decision(p);
  const input = valid(line) ? compact(line) : quote(line);
  p.custom(
    "baton.approval_followup",
    obj([
      ["inputSeq", omitInt(seq)],
      ["approvalId", omitStr(d.approvalId)],
      ["decidedBy", omitStr(d.decidedBy)],
      ["input", rawOut(input)],
    ]),
  );
  resolve(p, d.approvalId);
}

// What a prompt asks for, as the Go package policy's Reader.Request reads
// it (a Codex file change's paths, told by an earlier line, left out).
const claudeInput = struct({ command: "s", file_path: "s", notebook_path: "s", path: "s", pattern: "s", url: "s" });
const promptLine = struct({
  type: "s",
  request_id: "r",
  request: struct({ subtype: "s", tool_name: "s", input: "r" }),
  method: "s",
  id: "r",
  params: "r",
});
const codexParams = struct({ command: "s", commandActions: slice(struct({ command: "s" })) });

/** promptAsks is the tool and target a permission prompt asks for (Go:
 * policy.Reader.Request's Tool and Target), ["", ""] for no prompt. */
export function promptAsks(line: string): [string, string] {
  if (!line.includes("can_use_tool") && !line.includes("/requestApproval")) return ["", ""];
  const { v: m, ok } = unmarshal(line, promptLine);
  if (!ok) return ["", ""];
  if (m.type === "control_request" && m.request.subtype === "can_use_tool" && validID(m.request_id)) {
    return [m.request.tool_name, claudeTarget(m.request.tool_name, m.request.input)];
  }
  const command = m.method === "item/commandExecution/requestApproval";
  if ((command || m.method === "item/fileChange/requestApproval") && validID(m.id)) {
    if (!command) return ["Edit", ""];
    const p = m.params === null ? { command: "", commandActions: null } : unmarshal(m.params, codexParams).v;
    const cmds: string[] = [];
    const add = (c: string) => {
      if (c !== "" && !cmds.includes(c)) cmds.push(c);
    };
    add(unwrapShell(p.command));
    for (const a of p.commandActions ?? []) add(a.command);
    return ["Bash", cmds.join("\n")];
  }
  return ["", ""];
}

function validID(id: string | null): boolean {
  if (id === null) return false;
  const d = parse(id);
  if (!d) return false;
  const c = compact(id);
  return c.startsWith('"') || /^-?[0-9]/.test(c);
}

function claudeTarget(tool: string, input: string | null): string {
  const v = input === null ? unmarshal("{}", claudeInput).v : unmarshal(input, claudeInput).v;
  switch (tool) {
    case "Bash":
      return v.command;
    case "Read":
    case "Write":
    case "Edit":
    case "MultiEdit":
      return v.file_path;
    case "NotebookEdit":
      return v.notebook_path;
    case "Glob":
    case "Grep":
      return v.path !== "" ? v.path : v.pattern;
    case "WebFetch":
      return v.url;
  }
  return "";
}

/** unwrapShell is the script of a Codex command run through a shell,
 * `/bin/bash -lc '<script>'`, or the command as it is. */
function unwrapShell(cmd: string): string {
  const sp = cmd.indexOf(" ");
  if (sp < 0) return cmd;
  const prog = cmd.slice(0, sp);
  const rest = cmd.slice(sp + 1);
  const base = prog.slice(prog.lastIndexOf("/") + 1);
  if (base !== "bash" && base !== "sh" && base !== "zsh") return cmd;
  const sp2 = rest.indexOf(" ");
  if (sp2 < 0) return cmd;
  const flag = rest.slice(0, sp2);
  if (flag !== "-lc" && flag !== "-c") return cmd;
  const w = shellWord(rest.slice(sp2 + 1));
  return w ?? cmd;
}

/** shellWord unquotes s when it is exactly one POSIX shell word. */
function shellWord(s: string): string | undefined {
  let b = "";
  for (let i = 0; i < s.length; ) {
    const c = s[i]!;
    if (c === "'") {
      const end = s.indexOf("'", i + 1);
      if (end < 0) return undefined;
      b += s.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      i++;
      for (;;) {
        if (i >= s.length) return undefined;
        if (s[i] === '"') {
          i++;
          break;
        }
        if (s[i] === "\\" && i + 1 < s.length && '"\\$`'.includes(s[i + 1]!)) {
          i++;
        } else if (s[i] === "$" || s[i] === "`") {
          return undefined;
        }
        b += s[i];
        i++;
      }
    } else if (c === "\\") {
      if (i + 1 >= s.length) return undefined;
      b += s[i + 1];
      i += 2;
    } else {
      if (" \t\n;&|<>()$`*?[#~=%".includes(c)) return undefined;
      b += c;
      i++;
    }
  }
  return b;
}

/** An answer to one interrupt (@ag-ui/core's ResumeEntry). */
export interface ResumeEntry {
  interruptId: string;
  status: "resolved" | "cancelled";
  payload?: unknown;
  metadata?: Record<string, unknown>;
}

/** The approve request that answers an approval interrupt (Go: protocol.ApproveRequest). */
export interface ApproveRequest {
  id: string;
  allow: boolean;
  message?: string;
  by?: string;
}

/** The error resumeApproval throws for an entry that answers no approval interrupt. */
export class BadResumeError extends Error {
  constructor(msg: string) {
    super("bad resume entry: " + msg);
    this.name = "BadResumeError";
  }
}

/**
 * resumeApproval is the approve request that answers an approval
 * interrupt as the resume entry does (Go: agui.ResumeEntry.Approval):
 * resolved with payload {approved, message} (or a bare boolean) allows
 * or denies, cancelled denies; by names who answers, unless the entry's
 * metadata.by does. It throws BadResumeError.
 */
export function resumeApproval(e: ResumeEntry, by: string): ApproveRequest {
  if (!e.interruptId) throw new BadResumeError("no interruptId");
  const metaBy = e.metadata && typeof e.metadata.by === "string" && e.metadata.by !== "" ? e.metadata.by : "";
  const req: ApproveRequest = { id: e.interruptId, allow: false, by: metaBy || by };
  if (e.status === "cancelled") return { ...req, message: "the person asked cancelled the request" };
  if (e.status !== "resolved") throw new BadResumeError(`${JSON.stringify(e.interruptId)}: status ${JSON.stringify(e.status)} (want resolved or cancelled)`);
  if (typeof e.payload === "boolean") return { ...req, allow: e.payload };
  const p = e.payload as { approved?: unknown; message?: unknown } | null | undefined;
  if (!p || typeof p !== "object" || typeof p.approved !== "boolean") {
    throw new BadResumeError(`${JSON.stringify(e.interruptId)}: a resolved approval's payload is {"approved": true|false, "message": "..."}`);
  }
  const out: ApproveRequest = { ...req, allow: p.approved };
  if (typeof p.message === "string" && p.message !== "") out.message = p.message;
  return out;
}
