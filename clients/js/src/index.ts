// @batonhq/client: baton's protocol (docs/protocol.md) over any
// NatsConnection: Node (TCP, "@batonhq/client/node") or a browser
// (WebSocket, wsconnect, with a run token or a client's credentials).

import { wsconnect, type ConnectionOptions, type NatsConnection, type WsConnectionOptions } from "@nats-io/nats-core";
import { runInboxPrefix } from "./names.js";

export { BatonClient, base64url, DEFAULT_READ_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS, streamJSONUserMessage } from "./client.js";
export type { CallOptions, ClientOptions, ObjectInfo, PubAck, RunOutputs, SendOptions, SubmitOptions } from "./client.js";
export * from "./errors.js";
export { decodeMsgpack, MsgpackError } from "./msgpack.js";
export { Names, runInboxPrefix, validRunId } from "./names.js";
export { isTerminal } from "./types.js";
export type {
  CancelReply, Checkpoint, Egress, InputReply, Job, Output, RunRecord, SessionRecord, SessionSendReply, Status, StatusType,
  ToolMessage,
} from "./types.js";
export { Assembler, DEFAULT_MAX_LINE_BYTES, RunEvent, RunWatch } from "./watch.js";
export type { WatchOptions } from "./watch.js";
export { gzip, tarFiles, WORKSPACE_CHUNK_BYTES } from "./workspace.js";
export type { PutWorkspaceOptions, TarEntry } from "./workspace.js";

/** Options of connectRunToken: the websocket server(s), the run and its token. */
export interface RunTokenOptions extends Omit<WsConnectionOptions, "token" | "inboxPrefix" | "servers"> {
  /** ws:// or wss:// URL(s) of the server's websocket listener. */
  servers: string | string[];
  /** The run the token is for. */
  runId: string;
  /** The token (`baton token RUNID`, or the console's token endpoint). */
  token: string;
}

/**
 * connectRunToken connects over WebSocket with a run token, as a browser
 * does: the token is the connect token, and the connection's inbox is the
 * run's own (_INBOX_run.<runId>), the only one its token may read.
 */
export function connectRunToken(opts: RunTokenOptions): Promise<NatsConnection> {
  const { runId, token, ...rest } = opts;
  return wsconnect({ ...rest, token, inboxPrefix: runInboxPrefix(runId) });
}

/**
 * connectWebSocket connects over WebSocket with any credentials (nats-core's
 * wsconnect). It needs the platform's WebSocket: browsers, Node 22+, or
 * Node 20 with --experimental-websocket (or pass wsFactory).
 */
export function connectWebSocket(opts: ConnectionOptions | WsConnectionOptions): Promise<NatsConnection> {
  return wsconnect(opts);
}
