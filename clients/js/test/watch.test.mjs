// The watch's decoding of a run's egress and tool messages, as the Go
// client's (client/watch_internal_test.go TestEgressEvent, TestToolEvent);
// client.test.mjs watches a real run with host tools.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Assembler } from "../dist/index.js";

const enc = new TextEncoder();

/** part is a message of run r's chain on kind, at offset. */
function part(kind, seq, offset, body) {
  return { subject: `baton.runs.r.${kind}`, seq, headers: { get: (k) => (k === "Baton-Offset" ? String(offset) : "") }, data: enc.encode(body) };
}

test("an egress message comes decoded; a body that is none passes undecoded", () => {
  const a = new Assembler(1 << 10);
  const ev = a.add(part("egress", 1, 40,
    `{"host":"api.example.com","port":443,"method":"CONNECT","allowed":true,"secret":"KEY","bytesOut":5,"bytesIn":7,"durationMs":3}`));
  assert.equal(ev.kind, "egress");
  assert.equal(ev.offset, 40);
  assert.deepEqual(ev.egress, { host: "api.example.com", port: 443, method: "CONNECT", allowed: true, secret: "KEY", bytesOut: 5, bytesIn: 7, durationMs: 3 });
  const refused = a.add(part("egress", 2, 41, `{"host":"exfil.example","port":53,"method":"DNS","allowed":false,"reason":"not on the allowlist","secret":"","bytesOut":0,"bytesIn":0,"durationMs":0}`));
  assert.equal(refused.egress.allowed, false);
  assert.equal(refused.egress.reason, "not on the allowlist");
  for (const [seq, body] of [[3, "not json"], [4, "[1]"], [5, "null"], [6, `{"host":"x"}`]]) {
    const ev = a.add(part("egress", seq, 42, body));
    assert.equal(ev.egress, undefined, body);
    assert.equal(ev.text, body);
  }
  assert.equal(ev.tool, undefined);
});

test("a tool message comes decoded: a call, its answer, an error; a body that is none passes undecoded", () => {
  const a = new Assembler(1 << 10);
  const call = a.add(part("tool", 1, 40, `{"call":1,"phase":"call","name":"deploy","args":{"env":"prod"}}`));
  assert.equal(call.kind, "tool");
  assert.deepEqual(call.tool, { call: 1, phase: "call", name: "deploy", args: { env: "prod" } });
  assert.equal(call.egress, undefined);
  const result = a.add(part("tool", 2, 80, `{"call":1,"phase":"result","name":"deploy","result":"deployed v42","truncated":true}`));
  assert.deepEqual(result.tool, { call: 1, phase: "result", name: "deploy", result: "deployed v42", truncated: true });
  const failed = a.add(part("tool", 3, 120, `{"call":2,"phase":"result","name":"create_pr","error":"tool create_pr failed (409): a PR exists"}`));
  assert.equal(failed.tool.error, "tool create_pr failed (409): a PR exists");
  assert.equal(failed.tool.result, undefined);
  for (const [seq, body] of [[4, "not json"], [5, `"call"`], [6, `{"call":"1","phase":"call","name":"deploy"}`]]) {
    const ev = a.add(part("tool", seq, 121, body));
    assert.equal(ev.tool, undefined, body);
    assert.equal(ev.text, body);
  }
});
