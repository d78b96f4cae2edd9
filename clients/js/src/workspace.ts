// Uploading a workspace archive (docs/outputs-and-workspaces.md, Seeding a
// workspace; Go: client/workspace.go): chunks of 128 KiB on
// <prefix>.workspaces.<sha256 hex>.<i>, then the size record on
// <prefix>.workspaces.<hex>.size, each published expecting no earlier
// message on its subject, so nothing stored is replaced.

import { headers } from "@nats-io/nats-core";
import type { BatonClient } from "./client.js";
import { JetStreamError, WorkspacesFullError } from "./errors.js";

/** Every chunk of an archive but its last is this long (protocol.WorkspaceChunkBytes). */
export const WORKSPACE_CHUNK_BYTES = 128 << 10;
/** Bounds the wait for the stream's answer to one chunk or record. */
const WORKSPACE_ACK_TIMEOUT_MS = 30_000;
/** How many chunks are in flight at once. */
const WORKSPACE_WINDOW = 32;
// JSErrCodeStreamWrongLastSequence and its replicated-stream twin.
const WRONG_LAST_SEQUENCE = 10071;
const WRONG_LAST_SEQUENCE_CONSTANT = 10164;

export interface PutWorkspaceOptions {
  signal?: AbortSignal;
}

function hex(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

/** putWorkspace: see BatonClient.putWorkspace. */
export async function putWorkspace(c: BatonClient, archive: Uint8Array | Blob, opts: PutWorkspaceOptions = {}): Promise<string> {
  const data = archive instanceof Uint8Array ? archive : new Uint8Array(await archive.arrayBuffer());
  const gzipped = data.length >= 2 && data[0] === 0x1f && data[1] === 0x8b;
  const digest = hex(new Uint8Array(await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>)));
  const name = `sha256-${digest}.tar${gzipped ? ".gz" : ""}`;
  const stream = c.names.workspacesStream();
  const what = `put workspace ${name}`;
  if (await workspaceStored(c, digest, what, stream)) return name;
  // Chunks, a window at a time; one already stored (an upload cut short,
  // or one at the same time) is left as it is.
  const chunks = Math.ceil(data.length / WORKSPACE_CHUNK_BYTES);
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < chunks; i++) {
    opts.signal?.throwIfAborted();
    if (inFlight.length === WORKSPACE_WINDOW) await inFlight.shift();
    const chunk = data.subarray(i * WORKSPACE_CHUNK_BYTES, Math.min(data.length, (i + 1) * WORKSPACE_CHUNK_BYTES));
    const p = append(c, c.names.workspaceChunkSubject(digest, i), chunk, what, stream);
    p.catch(() => {}); // awaited below; no unhandled rejection meanwhile
    inFlight.push(p);
  }
  for (const p of inFlight) await p;
  // Last: a size record says the upload is complete.
  await append(c, c.names.workspaceSizeSubject(digest), new TextEncoder().encode(String(data.length)), what, stream);
  return name;
}

/** append publishes data expecting no message on subject yet: stored, or already there, is success. */
async function append(c: BatonClient, subject: string, data: Uint8Array, what: string, stream: string): Promise<void> {
  const h = headers();
  h.set("Nats-Expected-Last-Subject-Sequence", "0");
  try {
    await c.jsPublish(subject, data, h, what, stream, WORKSPACE_ACK_TIMEOUT_MS);
  } catch (e) {
    if (e instanceof JetStreamError) {
      if (e.errCode === WRONG_LAST_SEQUENCE || e.errCode === WRONG_LAST_SEQUENCE_CONSTANT) return;
      if (e.description.includes("maximum bytes exceeded")) {
        throw new WorkspacesFullError(`baton: ${what}: the workspaces stream is full (workspacesMaxBytes): ${e.description}`);
      }
    }
    throw e;
  }
}

/**
 * workspaceStored asks whether the archive of digest is stored, by a
 * publish of its size record that expects a last sequence no subject
 * reaches (2^63-1): the stream refuses it, saying the record's sequence, 0
 * when there is none. Any other refusal is taken as not stored.
 */
async function workspaceStored(c: BatonClient, digest: string, what: string, stream: string): Promise<boolean> {
  const h = headers();
  h.set("Nats-Expected-Last-Subject-Sequence", "9223372036854775807");
  try {
    await c.jsPublish(c.names.workspaceSizeSubject(digest), new Uint8Array(0), h, what, stream, WORKSPACE_ACK_TIMEOUT_MS);
  } catch (e) {
    if (!(e instanceof JetStreamError) || e.apiCode === 503 || e.apiCode === 408) throw e;
    const m = /^wrong last sequence: ([0-9]+)$/.exec(e.description);
    return e.errCode === WRONG_LAST_SEQUENCE && m !== null && Number(m[1]) > 0;
  }
  throw new JetStreamError(`baton: ${what}: the workspaces stream stored a probe it must refuse: is it baton's?`, 0, 0, "");
}

/** A file of an archive tarFiles writes: its bytes (or text), and a mode (default 0o644). */
export interface TarEntry {
  path: string;
  data?: Uint8Array | string;
  mode?: number;
  /** "file" (default), "dir" or "symlink" (data is the link's target). */
  type?: "file" | "dir" | "symlink";
  mtime?: Date;
}

/**
 * tarFiles writes entries as a tar archive (ustar; names past 100 bytes
 * in PAX records), in the order given, owned by nobody in particular: what
 * putWorkspace takes, in a browser too. gzip() compresses it.
 */
export function tarFiles(entries: TarEntry[]): Uint8Array {
  const enc = new TextEncoder();
  const blocks: Uint8Array[] = [];
  const pad = (n: number) => (512 - (n % 512)) % 512;
  for (const e of entries) {
    const type = e.type ?? "file";
    let name = e.path.replace(/^\/+/, "");
    if (type === "dir" && !name.endsWith("/")) name += "/";
    const body = type === "file" ? (typeof e.data === "string" ? enc.encode(e.data) : e.data ?? new Uint8Array(0)) : new Uint8Array(0);
    const link = type === "symlink" ? (typeof e.data === "string" ? e.data : new TextDecoder().decode(e.data ?? new Uint8Array(0))) : "";
    const nameBytes = enc.encode(name), linkBytes = enc.encode(link);
    const mtime = Math.floor((e.mtime ?? new Date(0)).getTime() / 1000);
    if (nameBytes.length > 100 || linkBytes.length > 100) {
      let rec = "";
      for (const [k, v] of [["path", name], ["linkpath", link]] as const) {
        if (k === "linkpath" && linkBytes.length <= 100) continue;
        const line = ` ${k}=${v}\n`;
        const base = enc.encode(line).length;
        let n = base + String(base).length;
        if (String(n).length !== String(base).length) n = base + String(n).length;
        rec += `${n}${line}`;
      }
      const pax = enc.encode(rec);
      blocks.push(tarHeader(enc, "PaxHeaders/" + name.slice(-80), 0o644, pax.length, mtime, "x", ""), pax, new Uint8Array(pad(pax.length)));
    }
    const typeflag = type === "dir" ? "5" : type === "symlink" ? "2" : "0";
    const mode = e.mode ?? (type === "dir" ? 0o755 : type === "symlink" ? 0o777 : 0o644);
    blocks.push(tarHeader(enc, name, mode, body.length, mtime, typeflag, link), body, new Uint8Array(pad(body.length)));
  }
  blocks.push(new Uint8Array(1024));
  const out = new Uint8Array(blocks.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const b of blocks) {
    out.set(b, at);
    at += b.length;
  }
  return out;
}

function tarHeader(enc: TextEncoder, name: string, mode: number, size: number, mtime: number, typeflag: string, link: string): Uint8Array {
  const h = new Uint8Array(512);
  const put = (off: number, len: number, s: string) => h.set(enc.encode(s).subarray(0, len), off);
  const octal = (off: number, len: number, n: number) => put(off, len, n.toString(8).padStart(len - 1, "0") + "\0");
  put(0, 100, name);
  octal(100, 8, mode);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, mtime);
  put(148, 8, "        ");
  put(156, 1, typeflag);
  put(157, 100, link);
  put(257, 8, "ustar\x0000");
  let sum = 0;
  for (const b of h) sum += b;
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

/** gzip compresses data with the platform's CompressionStream (browsers, Node 18+). */
export async function gzip(data: Uint8Array): Promise<Uint8Array> {
  const cs = new CompressionStream("gzip");
  const out = new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(cs);
  return new Uint8Array(await new Response(out).arrayBuffer());
}
