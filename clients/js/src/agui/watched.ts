import type { Message } from "./projector.js";

/** The fields of a watched event (the client's RunEvent) a projector reads. */
export interface WatchedEvent {
  kind: string;
  seq: number | bigint;
  data: Uint8Array | string;
  eof?: boolean;
  interrupt?: boolean;
  inputSeq?: number;
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
  if (ev.kind === "input") {
    const headers: Record<string, string> = {};
    if (ev.eof) headers["Baton-Input-EOF"] = "true";
    if (ev.interrupt) headers["Baton-Input-Kind"] = "interrupt";
    if (ev.inputSeq) headers["Baton-Input-Seq"] = String(ev.inputSeq);
    m.headers = headers;
  }
  return m;
}
