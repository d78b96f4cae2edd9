// The client's calls over TCP, as the `client` user of
// deploy/nats-auth.conf, against the real worker js_test.go starts.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  AbortedError, BatonClient, BrokenChunkError, DigestError, DuplicateError, InvalidError, NoInputError,
  NotEndedError, NotFoundError, SessionExistsError, TerminalError, base64url, gzip, tarFiles,
} from "../dist/index.js";
import { connect, putWorkspaceDir } from "../dist/node.js";
import { deployment, runId, show, skipReason, statuses, until, withDeadline } from "../testlib/env.mjs";

const env = deployment();
const NL = Buffer.from("\n");
// The server's max payload is 256 KiB: a line longer than 256 KiB less the
// publisher's 2 KiB of header room is published in pieces.
const CHUNK = (256 << 10) - 2048;

describe("client over TCP", { skip: env ? false : skipReason, timeout: 240_000 }, () => {
  let nc, client;
  before(async () => {
    nc = await withDeadline(connect({ ...env.tcp, name: "js client test" }), 10_000, "a TCP connection as user client");
    client = new BatonClient(nc);
  });
  after(async () => {
    await nc?.close();
  });

  describe("a run of long lines", () => {
    const id = runId("js-chunked");
    const args = ["--lines", "6", "--line-size", "600000", "--raw-every", "4", "--seed", "7"];
    let events, status;

    test("submit, then watch it to its terminal status", async () => {
      const ack = await client.submit({ runId: id, profile: "fake", args });
      assert.equal(ack.stream, "BATON_JOBS");
      assert.ok(ack.seq > 0);
      events = [];
      status = await withDeadline(client.watch(id, (ev) => { events.push(ev); }), 60_000, `watch ${id} to its terminal status`);
      assert.equal(status.status, "succeeded", show(events));
      assert.equal(status.exitCode, 0);
      assert.equal(status.runId, id);
      const st = statuses(events);
      assert.equal(st[0], "started");
      assert.deepEqual(st.slice(-1), ["succeeded"]);
      assert.equal(st.filter((s) => ["succeeded", "failed", "cancelled", "timeout", "lost", "paused"].includes(s)).length, 1);
      for (let i = 1; i < events.length; i++) {
        assert.ok(events[i].seq > events[i - 1].seq, `seq ${events[i].seq} after ${events[i - 1].seq}`);
      }
    });

    test("its lines are the fake agent's, byte for byte, and the journal's", () => {
      const lines = events.filter((e) => e.kind === "events" || e.kind === "raw");
      const got = Buffer.concat(lines.flatMap((l) => [Buffer.from(l.data), NL]));
      // The fake agent's output for the same arguments, run here.
      const want = execFileSync(env.bin, ["fake-agent", ...args], { input: "", maxBuffer: 64 << 20 });
      assert.equal(lines.length, want.toString().split("\n").length - 1);
      assert.ok(got.equals(want), `the watched lines (${got.length} bytes) are not the fake agent's (${want.length} bytes)`);
      // Some were chunked: longer than one message can carry.
      const wantLong = want.toString().split("\n").filter((l) => Buffer.byteLength(l) > CHUNK).length;
      assert.ok(wantLong >= 2, `the fake agent wrote only ${wantLong} lines over ${CHUNK} bytes`);
      assert.equal(lines.filter((l) => l.data.length > CHUNK).length, wantLong);
      // A raw line is exactly one that is not JSON.
      for (const l of lines) {
        let json = true;
        try { JSON.parse(l.text); } catch { json = false; }
        assert.equal(l.kind, json ? "events" : "raw", `line at seq ${l.seq}`);
      }
      assert.ok(lines.some((l) => l.kind === "raw"));
      // Offsets: each line's is just past it in the journal.
      let off = 0;
      for (const l of lines) {
        off += l.data.length + 1;
        assert.equal(l.offset, off);
      }
      // The journal holds the same bytes, then only its sentinel line.
      const journal = readFileSync(join(env.stateDir, "runs", id, "journal.ndjson"));
      assert.ok(journal.subarray(0, got.length).equals(got), "the journal does not begin with the watched lines");
      const rest = journal.subarray(got.length).toString();
      assert.equal(rest.split("\n").length, 2, `after the lines the journal has ${JSON.stringify(rest.slice(0, 300))}`);
      assert.ok(JSON.parse(rest).__nonce);
    });

    test("a watch from a sequence gets exactly the rest, also as an async iterator", async () => {
      for (const k of [0, 3, events.length - 2]) {
        const rest = [];
        const st = await withDeadline(client.watch(id, (ev) => { rest.push(ev); }, { fromSeq: events[k].seq + 1 }), 30_000, `watch ${id} from seq ${events[k].seq + 1}`);
        assert.equal(st.status, "succeeded");
        assert.deepEqual(rest.map((e) => [e.seq, e.kind, Buffer.from(e.data).toString("base64")]),
          events.slice(k + 1).map((e) => [e.seq, e.kind, Buffer.from(e.data).toString("base64")]));
      }
      const it = client.events(id);
      const all = [];
      for await (const ev of it) all.push(ev);
      assert.equal(it.result.status, "succeeded");
      assert.deepEqual(all.map((e) => [e.seq, e.text]), events.map((e) => [e.seq, e.text]));
      // Breaking out of the loop ends the watch.
      let n = 0;
      for await (const _ of client.events(id)) {
        if (++n === 2) break;
      }
      assert.equal(n, 2);
    });

    test("a watch that starts inside a chunked line is a BrokenChunkError", async () => {
      const long = events.find((e) => e.data.length > CHUNK);
      // Its seq is its last piece's; the piece before it is not its first.
      await assert.rejects(client.watch(id, () => {}, { fromSeq: long.seq }), (e) => {
        assert.ok(e instanceof BrokenChunkError, String(e));
        assert.equal(e.code, "broken_chunk");
        assert.match(e.message, /first piece is missing/);
        return true;
      });
    });

    test("an abort ends a watch with an AbortedError", async () => {
      const ac = new AbortController();
      const p = client.watch("js-never-submitted", () => {}, { signal: ac.signal });
      setTimeout(() => ac.abort(), 300);
      await assert.rejects(withDeadline(p, 5_000, "the aborted watch to end"), AbortedError);
    });

    test("its record, and the runs list", async () => {
      const rec = await client.run(id);
      assert.equal(rec.runId, id);
      assert.equal(rec.state, "succeeded");
      assert.equal(rec.profile, "fake");
      assert.equal(rec.node, "js");
      assert.equal(rec.attempt, 1);
      assert.ok(rec.createdAt instanceof Date && Math.abs(Date.now() - rec.createdAt.getTime()) < 120_000, String(rec.createdAt));
      assert.ok(rec.finishedAt instanceof Date && rec.finishedAt >= rec.createdAt);
      assert.equal(rec.exitCode, 0);
      assert.equal(rec.offset, status.offset);
      assert.deepEqual(JSON.parse(Buffer.from(rec.job).toString()), { runId: id, profile: "fake", args });
      const runs = await client.runs();
      assert.ok(runs.some((r) => r.runId === id));
      for (let i = 1; i < runs.length; i++) {
        assert.ok(runs[i - 1].createdAt >= runs[i].createdAt, "runs are newest first");
      }
      await assert.rejects(client.run("js-no-such-run"), NotFoundError);
      await assert.rejects(client.run("bad.id"), InvalidError);
      await assert.rejects(client.session("js-no-such-session"), NotFoundError);
      assert.ok(Array.isArray(await client.sessions()));
      assert.deepEqual(await client.status(id), status);
      assert.equal(await client.status("js-no-such-run"), null);
      assert.equal(await client.chainStored(id), true);
      assert.equal(await client.chainStored("js-no-such-run"), false);
      // An ended run takes no interrupt, nor input (409 before 405).
      await assert.rejects(client.interrupt(id), (e) => e instanceof TerminalError && e.code === "terminal");
      await assert.rejects(client.send(id, "x"), TerminalError);
    });

    test("submitting it again is a DuplicateError; a bad job is not sent", async () => {
      await assert.rejects(client.submit({ runId: id, profile: "fake", args }), (e) => {
        assert.ok(e instanceof DuplicateError);
        assert.equal(e.code, "duplicate");
        assert.equal(e.stream, "BATON_JOBS");
        return true;
      });
      await assert.rejects(client.submit({ runId: "has.dot", profile: "fake" }), InvalidError);
      await assert.rejects(client.submit({ runId: runId("js-noprofile"), profile: "" }), InvalidError);
    });
  });

  test("a watch that falls behind the live messages still hands on each line once, in order", async () => {
    // The watch begins before the run, so the whole run comes live. Its
    // first event stalls it until the chain holds 5,000 more messages:
    // the live buffer (4,096 messages) overflows and drops the rest, and
    // the next live message shows the gap, which the watch pages from
    // the relay.
    const id = runId("js-behind");
    const args = ["--lines", "9000", "--seed", "3"];
    const events = [];
    let stalled = false;
    const watching = client.watch(id, async (ev) => {
      events.push(ev);
      if (!stalled) {
        stalled = true;
        const ahead = client.events(id, { fromSeq: ev.seq + 5000 });
        await withDeadline(ahead.next(), 60_000, `the chain of ${id} to hold 5,000 messages past seq ${ev.seq}`);
        await ahead.return();
      }
    });
    await client.submit({ runId: id, profile: "fake", args });
    const st = await withDeadline(watching, 90_000, `watch ${id} to its terminal status`);
    assert.equal(st.status, "succeeded");
    const lines = events.filter((e) => e.kind === "events" || e.kind === "raw");
    const got = Buffer.concat(lines.flatMap((l) => [Buffer.from(l.data), NL]));
    const want = execFileSync(env.bin, ["fake-agent", ...args], { input: "", maxBuffer: 64 << 20 });
    assert.equal(lines.length, 9001); // --lines, then the result line
    assert.ok(got.equals(want), `the watched lines (${lines.length}, ${got.length} bytes) are not the fake agent's (${want.length} bytes)`);
    for (let i = 1; i < events.length; i++) {
      assert.ok(events[i].seq > events[i - 1].seq, `seq ${events[i].seq} after ${events[i - 1].seq}`);
    }
  });

  describe("workspaces and outputs", () => {
    for (const how of ["putWorkspaceDir", "tarFiles"]) {
      test(`a workspace uploaded with ${how} seeds the run; its outputs download checked`, async () => {
        const seed = `seeded by ${how} ${runId("x")}`;
        let name;
        if (how === "putWorkspaceDir") {
          const dir = mkdtempSync(join(tmpdir(), "baton-js-ws-"));
          writeFileSync(join(dir, "seed.txt"), seed + "\n");
          name = await putWorkspaceDir(client, dir);
          assert.match(name, /^sha256-[0-9a-f]{64}\.tar\.gz$/);
          assert.equal(await putWorkspaceDir(client, dir), name, "the same tree again has the same name");
        } else {
          const tar = tarFiles([{ path: "seed.txt", data: seed + "\n" }]);
          const plain = await client.putWorkspace(tar);
          assert.equal(plain, `sha256-${createHash("sha256").update(tar).digest("hex")}.tar`);
          const gz = await gzip(tar);
          name = await client.putWorkspace(new Blob([gz]));
          assert.equal(name, `sha256-${createHash("sha256").update(gz).digest("hex")}.tar.gz`);
          // A second upload is only the probe: the archive is stored.
          assert.equal(await client.putWorkspace(gz), name);
        }
        const id = runId("js-files");
        await client.submit({ runId: id, profile: "files", workspace: { object: name } });
        const events = [];
        const st = await withDeadline(client.watch(id, (ev) => { events.push(ev); }), 60_000, `watch ${id} to its terminal status`);
        assert.equal(st.status, "succeeded", `${st.reason ?? ""}\n${show(events)}`);
        assert.deepEqual(events.filter((e) => e.kind === "events").map((e) => e.text), [JSON.stringify({ read: seed })]);

        const outs = await client.outputs(id);
        assert.equal(outs.status, "succeeded");
        const pathDigest = createHash("sha256").update("out/report.md").digest("hex");
        assert.deepEqual(outs.outputs.map((o) => o.name).sort(), [`${id}/diff.patch`, `${id}/files/${pathDigest}`]);
        const file = outs.outputs.find((o) => o.path === "out/report.md");
        const want = Buffer.from(`${seed}\nmade by the agent\n`);
        assert.equal(file.size, want.length);
        const got = await client.getOutput(file);
        assert.ok(Buffer.from(got).equals(want), `out/report.md is ${JSON.stringify(Buffer.from(got).toString())}`);
        assert.equal(file.digest, "SHA-256=" + base64url(createHash("sha256").update(want).digest()));
        assert.deepEqual(await client.storedOutput(file.name), file);
        const diff = Buffer.from(await client.getOutput(outs.outputs.find((o) => o.name.endsWith("/diff.patch")))).toString();
        assert.match(diff, /\+\+\+ b\/out\/report\.md\n/);
        assert.ok(diff.includes(`+${seed}\n+made by the agent\n`), diff);

        // A digest or size that is not the stored object's is refused.
        const zeros = "SHA-256=" + base64url(new Uint8Array(32));
        await assert.rejects(client.getOutput({ ...file, digest: zeros }), (e) => e instanceof DigestError && e.code === "digest");
        await assert.rejects(client.getOutput({ ...file, size: file.size - 1 }), DigestError);
        await assert.rejects(client.getOutput({ ...file, size: file.size + 1 }), DigestError);
        await assert.rejects(client.getOutput({ ...file, name: `${id}/files/${"0".repeat(64)}` }), NotFoundError);
      });
    }

    test("outputs of no run is a NotFoundError", async () => {
      await assert.rejects(client.outputs("js-no-such-run"), NotFoundError);
    });
  });

  test("a run with host tools: each call and its answer decoded, in order", async () => {
    const id = runId("js-tools");
    // The agent is `baton mcp` itself; its stdin, the job's input, is what
    // an MCP client writes. It may make the two calls at once: their
    // numbers, not their order, pair calls with answers.
    const call = (n, name, args) => JSON.stringify({ jsonrpc: "2.0", id: n, method: "tools/call", params: { name, arguments: args } });
    await client.submit({ runId: id, profile: "tools", input: [call(1, "deploy", { env: "prod" }), call(2, "create_pr", { title: "x" })].join("\n") + "\n" });
    const events = [];
    const status = await withDeadline(client.watch(id, (ev) => { events.push(ev); }), 60_000, `watch ${id} to its terminal status`);
    assert.equal(status.status, "succeeded", show(events));
    const tools = events.filter((e) => e.kind === "tool");
    assert.equal(tools.length, 4, show(events));
    const byName = (name, phase) => tools.find((e) => e.tool.name === name && e.tool.phase === phase);
    const deploy = byName("deploy", "call"), deployed = byName("deploy", "result");
    const pr = byName("create_pr", "call"), refused = byName("create_pr", "result");
    assert.deepEqual(deploy.tool, { call: deploy.tool.call, phase: "call", name: "deploy", args: { env: "prod" } });
    assert.deepEqual(deployed.tool, { call: deploy.tool.call, phase: "result", name: "deploy", result: `deployed {"env":"prod"} for ${id}` });
    assert.deepEqual(pr.tool, { call: pr.tool.call, phase: "call", name: "create_pr", args: { title: "x" } });
    assert.deepEqual(refused.tool, { call: pr.tool.call, phase: "result", name: "create_pr", error: "tool create_pr failed (409): a pull request for this branch exists" });
    assert.deepEqual([deploy.tool.call, pr.tool.call].sort(), [1, 2]);
    // Each call before its answer, each answer before the agent's line that
    // answers its client.
    for (const [c, r, id] of [[deploy, deployed, 1], [pr, refused, 2]]) {
      const answer = events.find((e) => e.kind === "events" && JSON.parse(e.text).id === id);
      assert.ok(c.seq < r.seq && r.seq < answer.seq, `call ${c.seq}, answer ${r.seq}, the agent's line ${answer.seq}`);
    }
  });

  test("cancel a running run", async () => {
    const id = runId("js-cancel");
    await client.submit({ runId: id, profile: "fake", args: ["--duration", "1m", "--rate", "20"] });
    const it = client.events(id);
    const seen = [];
    try {
      await until(it, seen, (e) => e.kind === "events", 30_000, `a first line of ${id}`);
      await assert.rejects(client.outputs(id), NotEndedError);
      await assert.rejects(client.send(id, "hello"), (e) => e instanceof NoInputError && e.code === "no_input");
      const rep = await client.cancel(id);
      assert.equal(rep.runId, id);
      assert.equal(rep.node, "js");
      const end = await until(it, seen, (e) => e.kind === "status" && e.status.status === "cancelled", 30_000, `${id} to end cancelled`);
      assert.equal(it.result, end.status);
      assert.equal((await it.next()).done, true);
      assert.equal(it.result.status, "cancelled");
    } finally {
      await it.return();
    }
    // The record is written just after the terminal status: once it says
    // cancelled, a cancel is refused.
    await withDeadline((async () => {
      while ((await client.run(id)).state !== "cancelled") await new Promise((r) => setTimeout(r, 100));
    })(), 10_000, `the record of ${id} to say cancelled`);
    await assert.rejects(client.cancel(id), (e) => e instanceof TerminalError && e.code === "terminal");
    await assert.rejects(client.cancel("js-no-such-run"), (e) => e instanceof NotFoundError && e.code === "not_found");
  });

  test("an interactive run: send, interrupt, end of input", async () => {
    const id = runId("js-chat");
    await client.submit({ runId: id, profile: "chat", input: "hello" });
    const it = client.events(id);
    const seen = [];
    const echo = (text, turns) => [
      JSON.stringify({ message: { content: [{ text, type: "text" }], role: "assistant" }, type: "assistant" }),
      JSON.stringify({ is_error: false, num_turns: turns, result: text, session_id: "fake-session", subtype: "success", terminal_reason: "completed", type: "result" }),
    ];
    try {
      await until(it, seen, (e) => e.kind === "status" && e.status.status === "waiting", 30_000, `${id} to wait after its first turn`);
      const lines = () => seen.filter((e) => e.kind === "events").map((e) => e.text);
      assert.deepEqual(lines().slice(-2), echo("echo: hello", 1));

      const rep = await client.send(id, "second", { msgId: `${id}-second` });
      assert.equal(rep.runId, id);
      assert.ok(rep.seq > 0);
      const dup = await client.send(id, "second", { msgId: `${id}-second` });
      assert.equal(dup.seq, rep.seq, "the same msgId is stored once");
      const input = await until(it, seen, (e) => e.kind === "input", 30_000, `the input of ${id} on its chain`);
      assert.equal(input.text, "second\n");
      assert.equal(input.inputSeq, rep.seq);
      assert.equal(input.eof, false);
      await until(it, seen, (e) => e.kind === "status" && e.status.status === "waiting", 30_000, `${id} to wait after its second turn`);
      assert.deepEqual(lines().slice(-2), echo("echo: second", 2));

      // A slow turn, stopped by an interrupt (SIGINT to the agent).
      await client.send(id, "slow");
      await until(it, seen, (e) => e.kind === "events" && e.text.includes('"progress"'), 30_000, `progress of ${id}'s slow turn`);
      const irep = await client.interrupt(id);
      assert.ok(irep.seq > rep.seq);
      const res = await until(it, seen, (e) => e.kind === "events" && e.text.includes('"type":"result"'), 30_000, `the interrupted turn's result`);
      assert.equal(JSON.parse(res.text).terminal_reason, "aborted_streaming", show(seen));
      const irec = seen.find((e) => e.kind === "input" && e.inputSeq === irep.seq);
      assert.ok(irec?.interrupt, `no interrupt on the chain:\n${show(seen)}`);

      const eof = await client.send(id, "", { eof: true });
      assert.ok(eof.seq > irep.seq);
      await until(it, seen, (e) => e.kind === "status" && e.status.status === "succeeded", 30_000, `${id} to succeed after its end of input`);
      const inputs = seen.filter((e) => e.kind === "input");
      assert.deepEqual(inputs.map((e) => [e.text, e.eof, e.interrupt]), [["second\n", false, false], ["slow\n", false, false], [inputs[2].text, false, true], ["", true, false]]);
    } finally {
      await it.return();
    }
    // Its stdin is closed: no more input.
    await assert.rejects(client.send(id, "too late"), TerminalError);
    await assert.rejects(client.send("js-no-such-run", "x"), NotFoundError);
    await assert.rejects(client.interrupt("js-no-such-run"), NotFoundError);
  });

  test("a session: its first run, sendSession to its live run, then to start its next, its record", async () => {
    const sid = runId("js-sess");
    const first = runId("js-sess-run");
    await client.submit({ runId: first, profile: "chat", input: "one" }, { session: sid });
    const it = client.events(first);
    const seen = [];
    try {
      await until(it, seen, (e) => e.kind === "status" && e.status.status === "waiting", 30_000, `${first} to wait after its first turn`);
      const live = await client.sendSession(sid, "two");
      assert.equal(live.session, sid);
      assert.equal(live.runId, first);
      assert.equal(live.started, false);
      assert.ok(live.seq > 0);
      await until(it, seen, (e) => e.kind === "events" && e.text.includes('"result":"echo: two"'), 30_000, `the answer to the session's input`);
      const rec = await client.session(sid);
      assert.equal(rec.id, sid);
      assert.equal(rec.profile, "chat");
      assert.equal(rec.live, first);
      assert.ok(rec.createdAt instanceof Date);
      assert.ok((await client.sessions()).some((s) => s.id === sid));
      await client.send(first, "", { eof: true });
      const end = await until(it, seen, (e) => e.kind === "status" && e.status.status === "succeeded", 30_000, `${first} to succeed`);
      assert.equal(end.status.session, sid);
      assert.ok(end.status.checkpoint?.object, `no checkpoint in ${end.text}`);
    } finally {
      await it.return();
    }
    // With no live run, a send starts the session's next run, its text the job's input.
    const next = await withDeadline((async () => {
      // The session's live run is cleared just after its terminal status:
      // until then a send goes to the ended run and is refused.
      for (;;) {
        try {
          const r = await client.sendSession(sid, "three");
          if (r.started) return r;
        } catch (e) {
          if (!(e instanceof SessionExistsError || e instanceof TerminalError)) throw e;
        }
        await new Promise((res) => setTimeout(res, 200));
      }
    })(), 20_000, `a sendSession to ${sid} to start its next run`);
    assert.notEqual(next.runId, first);
    const seen2 = [];
    const it2 = client.events(next.runId);
    try {
      await until(it2, seen2, (e) => e.kind === "events" && e.text.includes('"result":"echo: three"'), 30_000, `${next.runId} to answer the text that started it`);
      await client.send(next.runId, "", { eof: true });
      await until(it2, seen2, (e) => e.kind === "status" && e.status.status === "succeeded", 30_000, `${next.runId} to succeed`);
    } finally {
      await it2.return();
    }
  });
});
