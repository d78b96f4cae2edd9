// The browser's path: a connection over WebSocket with a run token
// (deploy/nats-browser.conf's auth callout), watching its run from the
// start and live, and sending its input.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { AbortedError, BatonClient, NoWorkerError, connectRunToken, streamJSONUserMessage } from "../dist/index.js";
import { connect } from "../dist/node.js";
import { deployment, show, skipReason, statuses, until, withDeadline } from "../testlib/env.mjs";

const env = deployment();

describe("a run token over WebSocket", { skip: env ? false : skipReason, timeout: 120_000 }, () => {
  let tcp, ws, readOnly;
  before(async () => {
    assert.equal(typeof WebSocket, "function",
      "this Node has no WebSocket: Node 22+ has one, Node 20 needs NODE_OPTIONS=--experimental-websocket (js_test.go sets it)");
    tcp = await withDeadline(connect(env.tcp), 10_000, "a TCP connection as user client");
    ws = await withDeadline(connectRunToken({ servers: env.wsURL, runId: env.wsRun, token: env.wsToken }), 10_000,
      `a WebSocket connection with the token of ${env.wsRun}`);
    readOnly = await withDeadline(connectRunToken({ servers: env.wsURL, runId: env.wsRun, token: env.wsReadToken }), 10_000,
      `a WebSocket connection with the read-only token of ${env.wsRun}`);
  });
  after(async () => {
    await Promise.all([tcp?.close(), ws?.close(), readOnly?.close()]);
  });

  test("watch and send with the token; the chain is the one a client sees", async () => {
    const id = env.wsRun;
    const client = new BatonClient(tcp);
    const browser = new BatonClient(ws);
    assert.equal(browser.inboxPrefix, `_INBOX_run.${id}`);
    await client.submit({ runId: id, profile: "chat", input: "hi from the page" });

    const it = browser.events(id);
    const seen = [];
    try {
      await until(it, seen, (e) => e.kind === "status" && e.status.status === "waiting", 30_000, `${id} to wait after its first turn (watched over WebSocket)`);
      // As Claude Code's stream-json takes it: the fake agent reads both.
      const rep = await browser.send(id, streamJSONUserMessage("typed in the browser"));
      assert.equal(rep.runId, id);
      await until(it, seen, (e) => e.kind === "events" && e.text.includes('"result":"echo: typed in the browser"'), 30_000, "the answer to the browser's input");
      await browser.send(id, "", { eof: true });
      await until(it, seen, (e) => e.kind === "status" && e.status.status === "succeeded", 30_000, `${id} to succeed`);
    } finally {
      await it.return();
    }
    const lines = seen.filter((e) => e.kind === "events").map((e) => JSON.parse(e.text));
    assert.deepEqual(lines.filter((l) => l.type === "result").map((l) => l.result), ["echo: hi from the page", "echo: typed in the browser"]);
    assert.deepEqual(seen.filter((e) => e.kind === "input").map((e) => [e.text, e.eof]), [[`{"message":{"content":"typed in the browser","role":"user"},"parent_tool_use_id":null,"session_id":"default","type":"user"}\n`, false], ["", true]]);
    assert.deepEqual(statuses(seen).slice(-1), ["succeeded"]);

    // The same chain, message for message, from a client over TCP and
    // from the read-only token, each replayed from the start.
    const key = (evs) => evs.map((e) => [e.seq, e.kind, e.text]);
    for (const [who, c] of [["a client over TCP", client], ["the read-only token", new BatonClient(readOnly)]]) {
      const again = [];
      const st = await withDeadline(c.watch(id, (ev) => { again.push(ev); }), 30_000, `a replay of ${id} by ${who}`);
      assert.equal(st.status, "succeeded");
      assert.deepEqual(key(again), key(seen), `${who} saw:\n${show(again)}\nthe browser:\n${show(seen)}`);
    }
  });

  test("the read-only token may not send", async () => {
    const c = new BatonClient(readOnly, { requestTimeoutMs: 2000 });
    await assert.rejects(withDeadline(c.send(env.wsRun, "not allowed"), 10_000, "the refused send to fail"));
  });

  test("a read the token may not make gets no answer: no worker answers, as the Go client says", async () => {
    const c = new BatonClient(ws, { readTimeoutMs: 500 });
    await assert.rejects(c.run(env.wsRun), (e) => e instanceof NoWorkerError && e.code === "no_worker");
    const told = [];
    const ac = new AbortController();
    const p = c.watch("js-another-run", () => {}, { signal: ac.signal, onWorkers: (answering) => { told.push(answering); ac.abort(); } });
    await assert.rejects(withDeadline(p, 10_000, "the watch of another run to be told no worker answers"), AbortedError);
    assert.deepEqual(told, [false]);
  });
});
