// Approvals (see the Go package's approval.go): a permission prompt of a
// run whose profile has a policy carries the approval's id, the policy's
// verdict and its rule; one the policy asks a person about stays open
// until a decision input (not the timeout's hold) or a follow-up turn
// answers it, and a turn that ends while one is open ends with the
// interrupt outcome.
import { compact, obj, omitInt, omitRaw, omitStr, quote, rawOut, slice, struct, unmarshal, valid } from "./json.js";
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
export function prompt(p: Projector, a: ApprovalFields, tool: string, target: string): void {
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

const claudeInput = struct({ command: "s", file_path: "s", notebook_path: "s", path: "s", pattern: "s", url: "s" });

/** claudeTarget is what a can_use_tool prompt's tool acts on. */
export function claudeTarget(input: string | null): string {
  if (input === null) return "";
  const { v } = unmarshal(input, claudeInput);
  for (const s of [v.command, v.file_path, v.notebook_path, v.path, v.pattern, v.url]) if (s !== "") return s;
  return "";
}

/** codexAsked names what a requestApproval asks for as a policy reads it. */
export function codexAsked(method: string, command: string | null, commandActions: string | null): [string, string] {
  if (method.startsWith("item/commandExecution/")) {
    const actions = commandActions === null ? [] : (unmarshal(commandActions, slice(struct({ command: "s" }))).v ?? []);
    if (actions.length > 0 && actions[0].command !== "") return ["Bash", actions[0].command];
    const s = command === null ? { v: "", ok: false } : unmarshal<string>(command, "s");
    if (s.ok) return ["Bash", s.v];
    const argv = command === null ? [] : (unmarshal<string[]>(command, slice("s")).v ?? []);
    return ["Bash", argv.join(" ")];
  }
  if (method.startsWith("item/fileChange/")) return ["Edit", ""];
  return ["", ""];
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
