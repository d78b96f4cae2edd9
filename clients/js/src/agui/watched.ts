import type { Message } from "./projector.js";

/** The fields of a watched event (the client's RunEvent) a projector reads. */
export interface WatchedEvent {
  kind: string;
  seq: number | bigint;
  data: Uint8Array | string;
  eof?: boolean;
  interrupt?: boolean;
  inputSeq?: number;
  inputKind?: string;
  approval?: string;
  verdict?: string;
  rule?: string;
  decidedBy?: string;
}

/**
 * messageOf is the Message a projector reads for an event a watch
 * delivered (the Go client's AGUIMessage): a chunked line is whole in it
 * already; an input's headers come back from its fields.
 *
 *   const p = new Projector(runId, { dialect: record.events, jobInput: record.input })
 *   await watch(nc, runId, (ev) => { for (const e of p.project(messageOf(ev))) show(e.event) })
 */
export function messageOf(ev: WatchedEvent): Message {
  const m: Message = { kind: ev.kind, seq: ev.seq, data: ev.data };
  const headers: Record<string, string> = {};
  if (ev.kind === "input") {
    if (ev.eof) headers["Baton-Input-EOF"] = "true";
    const kind = ev.interrupt ? "interrupt" : (ev.inputKind ?? "");
    if (kind) headers["Baton-Input-Kind"] = kind;
    if (ev.inputSeq) headers["Baton-Input-Seq"] = String(ev.inputSeq);
    m.headers = headers;
  }
  if (ev.approval) {
    headers["Baton-Approval"] = ev.approval;
    if (ev.verdict) headers["Baton-Verdict"] = ev.verdict;
    if (ev.rule) headers["Baton-Rule"] = ev.rule;
    if (ev.decidedBy) headers["Baton-Decided-By"] = ev.decidedBy;
    m.headers = headers;
  }
  return m;
}
