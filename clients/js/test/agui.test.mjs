// The TypeScript AG-UI projection against the Go one: the golden pairs
// of agui/testdata (NAME.chain.ndjson projected must give NAME.agui.ndjson
// byte for byte, as `go test ./agui` checks of the Go projection), the
// official @ag-ui/core schemas, resuming, carried state, and malformed
// chains. BATON_AGUI_TESTDATA overrides where the fixtures are.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  BadPositionError,
  BadStateError,
  Dialects,
  goBytes,
  messageOf,
  parseDialect,
  Position,
  Projector,
  resumeApproval,
  BadResumeError,
  UnknownDialectError,
} from "../dist/agui/index.js";

// The Go test runs the suite in a copy of the package: BATON_JS_REPO names
// the repository the fixtures are in.
const testdata = process.env.BATON_AGUI_TESTDATA ??
  (process.env.BATON_JS_REPO ? join(process.env.BATON_JS_REPO, "agui", "testdata") : fileURLToPath(new URL("../../../agui/testdata/", import.meta.url)));
const fixtures = JSON.parse(readFileSync(join(testdata, "fixtures.json"), "utf8"));
const enc = new TextEncoder();

function options(f) {
  return { dialect: f.dialect ?? "", threadId: f.threadId || undefined, jobInput: f.jobInput || undefined };
}

// millis reads an RFC 3339 time as Go's UnixMilli does (truncated to the
// millisecond).
function millis(s) {
  if (!s || s.startsWith("0001-01-01T00:00:00")) return undefined;
  return Date.parse(s.replace(/(\.\d{3})\d+/, "$1"));
}

// chain reads NAME.chain.ndjson: one stored message a line.
function chain(name) {
  return readFileSync(join(testdata, name + ".chain.ndjson"), "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const c = JSON.parse(l);
      return { kind: c.kind, seq: c.seq, headers: c.headers ?? {}, data: c.data ?? "", time: millis(c.time) };
    });
}

function project(p, msgs) {
  return msgs.flatMap((m) => p.project(m));
}

// golden renders events as a .agui.ndjson file's bytes.
function golden(evs) {
  const parts = evs.map((e) => goBytes(`{"id":"${e.pos}","event":${e.json}}\n`));
  return Buffer.concat(parts);
}

function firstDiff(got, want) {
  const g = got.toString("utf8").split("\n");
  const w = want.toString("utf8").split("\n");
  for (let i = 0; i < Math.max(g.length, w.length); i++) {
    if (g[i] !== w[i]) return `line ${i + 1}:\n got ${g[i]}\nwant ${w[i]}`;
  }
  return "";
}

test("every chain has its golden events and a fixture entry", () => {
  const files = readdirSync(testdata);
  const chains = files.filter((f) => f.endsWith(".chain.ndjson")).map((f) => f.slice(0, -".chain.ndjson".length));
  assert.ok(chains.length > 0, "no fixtures in " + testdata);
  for (const name of chains) {
    assert.ok(files.includes(name + ".agui.ndjson"), name + ".agui.ndjson is missing");
    assert.ok(
      fixtures.some((f) => f.name === name),
      name + " is not in fixtures.json",
    );
  }
});

for (const f of fixtures) {
  test(`golden ${f.name}: the projection is the Go one, byte for byte`, () => {
    const got = golden(project(new Projector(f.runId, options(f)), chain(f.name)));
    const want = readFileSync(join(testdata, f.name + ".agui.ndjson"));
    assert.ok(got.equals(want), firstDiff(got, want));
  });
}

// What a watch delivers: whole lines with no stored time, an input's
// headers as fields. messageOf puts the headers back: every chain of
// whole lines projects as the stored messages (their times left out) do.
test("messageOf: watched events project as the stored chain does", () => {
  let checked = 0;
  for (const f of fixtures) {
    const msgs = chain(f.name).map((m) => ({ ...m, time: undefined }));
    if (msgs.some((m) => m.headers["Baton-Chunk"])) continue;
    const watched = msgs.map((m) => ({
      kind: m.kind, seq: m.seq, data: m.data,
      eof: m.headers["Baton-Input-EOF"] === "true",
      interrupt: m.headers["Baton-Input-Kind"] === "interrupt",
      inputSeq: Number(m.headers["Baton-Input-Seq"] ?? 0),
      inputKind: m.headers["Baton-Input-Kind"] ?? "",
      approval: m.headers["Baton-Approval"] ?? "",
      verdict: m.headers["Baton-Verdict"] ?? "",
      rule: m.headers["Baton-Rule"] ?? "",
      decidedBy: m.headers["Baton-Decided-By"] ?? "",
    }));
    const got = golden(project(new Projector(f.runId, options(f)), watched.map(messageOf)));
    const want = golden(project(new Projector(f.runId, options(f)), msgs));
    assert.ok(got.equals(want), f.name + ": " + firstDiff(got, want));
    checked += msgs.some((m) => m.kind === "input") ? 1 : 0;
  }
  assert.ok(checked >= 3, `only ${checked} fixtures of whole lines have inputs`);
});

test("every event parses with @ag-ui/core's EventSchemas", async () => {
  let schemas;
  try {
    schemas = await import("@ag-ui/core/schemas");
  } catch (e) {
    assert.fail(`@ag-ui/core/schemas does not load (it needs its peer zod installed): ${e.message}`);
  }
  const { EventSchemas } = schemas;
  for (const f of fixtures) {
    for (const e of project(new Projector(f.runId, options(f)), chain(f.name))) {
      const r = EventSchemas.safeParse(e.event);
      assert.ok(r.success, `${f.name} ${e.pos} ${e.event.type}: ${r.error?.message}`);
      assert.deepEqual(JSON.parse(e.json), e.event);
    }
  }
});

// Resuming after any position, by replay (after) and by carried state
// (restore), gives exactly the uninterrupted projection's tail, as the Go
// package's TestResume checks.
for (const f of fixtures) {
  test(`resume ${f.name}: after every position, replayed and restored`, () => {
    const msgs = chain(f.name);
    const full = project(new Projector(f.runId, options(f)), msgs);
    const states = [];
    const p = new Projector(f.runId, options(f));
    for (const m of msgs) {
      p.project(m);
      states.push(p.state());
    }
    const points = [new Position(0n, 0), new Position(BigInt(msgs.at(-1).seq), 1 << 20)];
    for (const e of full) points.push(e.pos, new Position(e.pos.seq - 1n, 1 << 20));
    for (const at of points) {
      const want = golden(full.filter((e) => at.less(e.pos)));
      const opts = { ...options(f), after: at };
      const replayed = golden(project(new Projector(f.runId, opts), msgs));
      assert.ok(replayed.equals(want), `replayed after ${at}: ${firstDiff(replayed, want)}`);
      let k = 0;
      while (k < msgs.length && BigInt(msgs[k].seq) < at.seq) k++;
      const q = new Projector(f.runId, opts);
      if (k > 0) q.restore(states[k - 1]);
      const carried = golden(project(q, msgs.slice(k)));
      assert.ok(carried.equals(want), `restored before seq ${at.seq}, after ${at}: ${firstDiff(carried, want)}`);
    }
  });
}

test("state is the Go projector's State, byte for byte, and restores", () => {
  // What the Go package's State returned at these points (a Codex item's
  // hash; a Claude message with open blocks, a turn's usage past 2^53, an
  // interrupt and a chunked line half read).
  const f = fixtures.find((x) => x.name === "codex-app-server");
  const msgs = chain(f.name);
  const p = new Projector(f.runId, options(f));
  for (const m of msgs) {
    p.project(m);
    if (m.seq === 14) break;
  }
  const want1 =
    '{"v":1,"runId":"run-codex-app","lastSeq":14,"runs":1,"run":"run-codex-app","open":[{"key":"item:rs_mock","kind":"reasoning","id":"run-codex-app:12:0","sent":19,"sum":16747745543899804545}]}';
  assert.equal(p.state(), want1);

  const lines = [
    ["status", '{"status":"started","runId":"r"}'],
    ["events", '{"type":"stream_event","event":{"type":"message_start","message":{"id":"m<1>"}}}'],
    ["events", '{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t&1","name":"Bash"}}}'],
    ["events", '{"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"a"}}}'],
    ["events", '{"type":"result","subtype":"success","modelUsage":{"m":{"inputTokens":9007199254740993}}}'],
    ["input", "stop", { "Baton-Input-Kind": "interrupt" }],
    ["events", '{"type":"sys', { "Baton-Chunk": "1/2" }],
  ];
  const q = new Projector("r");
  lines.forEach(([kind, data, headers], i) => q.project({ kind, seq: i + 1, data, headers }));
  const want2 =
    '{"v":1,"runId":"r","lastSeq":7,"dialect":"claude","runs":1,"run":"r","open":[{"key":"block:0","kind":"tool","id":"r:3:0","tool":"t\\u00261"},{"key":"block:1","kind":"text","id":"r:4:0","sum":14695981039346656037}],"msg":"m\\u003c1\\u003e","streamed":true,"parent":"r:4:0","turn":{"line":{"type":"result","subtype":"success","modelUsage":{"m":{"inputTokens":9007199254740993}}},"usage":[{"provider":"anthropic","model":"m","inputTokens":9007199254740993,"totalTokens":9007199254740993}]},"interrupted":true,"chunk":{"kind":"events","n":2,"next":2,"first":7,"buf":"eyJ0eXBlIjoic3lz"}}';
  assert.equal(q.state(), want2);

  // Restored (from a string or bytes), the state is the same and goes on.
  const r = new Projector("r");
  r.restore(enc.encode(want2));
  assert.equal(r.state(), want2);
  const rest = [
    { kind: "events", seq: 8, data: 'tem","subtype":"init"}', headers: { "Baton-Chunk": "2/2" } },
    { kind: "status", seq: 9, data: '{"status":"succeeded","runId":"r"}' },
  ];
  const a = golden(project(q, rest));
  const b = golden(project(r, rest));
  assert.ok(a.equals(b), firstDiff(a, b));
  assert.match(a.toString(), /claude\.init/);
  assert.match(a.toString(), /"inputTokens":9007199254740993/);
});

test("restore refuses what is no state of this run", () => {
  const p = new Projector("r");
  for (const [name, b] of [
    ["garbage", "{"],
    ["another run", new Projector("other").state()],
    ["another version", '{"v":99,"runId":"r"}'],
    ["a field of another type", '{"v":1,"runId":"r","runs":"1"}'],
  ]) {
    assert.throws(() => p.restore(b), BadStateError, name);
  }
});

// Malformed chains give what the Go projection gives (its output pasted
// here: a CUSTOM baton.error for a broken chunk sequence or an oversize
// line, RAW or baton.raw for what is not a line of the dialect).
const started = ["status", '{"status":"started","runId":"r"}'];
const runStarted = '{"id":"1:0","event":{"type":"RUN_STARTED","threadId":"r","runId":"r","rawEvent":{"status":"started","runId":"r"}}}';
const malformed = [
  {
    name: "bad JSON on events",
    chain: [started, ["events", '{"type":"assistant","message":']],
    want: [runStarted, '{"id":"2:0","event":{"type":"CUSTOM","name":"baton.raw","value":{"line":"{\\"type\\":\\"assistant\\",\\"message\\":"}}}'],
  },
  {
    name: "a line of the wrong shape",
    chain: [started, ["events", '{"type":"assistant","message":{"id":5,"content":[]}}']],
    want: [runStarted, '{"id":"2:0","event":{"type":"RAW","event":{"type":"assistant","message":{"id":5,"content":[]}},"source":"claude"}}'],
  },
  {
    name: "a sub-agent's line",
    chain: [started, ["events", '{"type":"assistant","parent_tool_use_id":"t1","message":{"id":"m","content":[]}}']],
    want: [
      runStarted,
      '{"id":"2:0","event":{"type":"RAW","event":{"type":"assistant","parent_tool_use_id":"t1","message":{"id":"m","content":[]}},"source":"claude"}}',
    ],
  },
  {
    name: "statuses that are none",
    chain: [started, ["status", '{"status":3}'], ["status", "not json"], ["status", '{"status":"succeeded","time":"yesterday"}']],
    want: [
      runStarted,
      '{"id":"2:0","event":{"type":"RAW","event":{"status":3},"source":"baton"}}',
      '{"id":"3:0","event":{"type":"CUSTOM","name":"baton.raw","value":{"line":"not json"}}}',
      '{"id":"4:0","event":{"type":"RAW","event":{"status":"succeeded","time":"yesterday"},"source":"baton"}}',
    ],
  },
  {
    name: "no first piece",
    chain: [started, ["raw", "cd", { "Baton-Chunk": "2/3" }], ["raw", "x"]],
    want: [
      runStarted,
      '{"id":"2:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"seq 2 is piece 2/3 of a line whose first piece is missing"}}}',
      '{"id":"3:0","event":{"type":"CUSTOM","name":"baton.raw","value":{"line":"x"}}}',
    ],
  },
  {
    name: "a piece missing",
    chain: [started, ["raw", "ab", { "Baton-Chunk": "1/3" }], ["raw", "ef", { "Baton-Chunk": "3/3" }]],
    want: [
      runStarted,
      '{"id":"3:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"the line started at seq 2 expected piece 2/3, seq 3 is 3/3"}}}',
    ],
  },
  {
    name: "another line between",
    chain: [started, ["raw", "ab", { "Baton-Chunk": "1/2" }], ["raw", "x"], ["raw", "cd", { "Baton-Chunk": "2/2" }]],
    want: [
      runStarted,
      '{"id":"3:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"the line started at seq 2 lacks pieces 2..2 of 2"}}}',
      '{"id":"3:1","event":{"type":"CUSTOM","name":"baton.raw","value":{"line":"x"}}}',
      '{"id":"4:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"seq 4 is piece 2/2 of a line whose first piece is missing"}}}',
    ],
  },
  {
    name: "another subject",
    chain: [started, ["raw", "ab", { "Baton-Chunk": "1/2" }], ["events", "cd", { "Baton-Chunk": "2/2" }]],
    want: [
      runStarted,
      '{"id":"3:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"the line started at seq 2 lacks pieces 2..2 of 2"}}}',
      '{"id":"3:1","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"seq 3 is piece 2/2 of a line whose first piece is missing"}}}',
    ],
  },
  {
    name: "bad chunk headers",
    chain: [started, ...["0/2", "3/2", "+1/2", "x", "1/\u00e9\u0007"].map((h) => ["raw", "a", { "Baton-Chunk": h }])],
    want: [
      runStarted,
      '{"id":"2:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"seq 2 has a bad Baton-Chunk header \\"0/2\\""}}}',
      '{"id":"3:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"seq 3 has a bad Baton-Chunk header \\"3/2\\""}}}',
      '{"id":"4:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"seq 4 has a bad Baton-Chunk header \\"+1/2\\""}}}',
      '{"id":"5:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"seq 5 has a bad Baton-Chunk header \\"x\\""}}}',
      '{"id":"6:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"seq 6 has a bad Baton-Chunk header \\"1/\u00e9\\\\a\\""}}}',
    ],
  },
  {
    name: "an oversize line",
    chain: [started, ["events", '{"type":', { "Baton-Chunk": "1/2" }], ["events", '"result"}', { "Baton-Chunk": "2/2" }], ["raw", "x"]],
    want: [
      runStarted,
      '{"id":"3:0","event":{"type":"CUSTOM","name":"baton.error","value":{"message":"the line started at seq 2 is larger than 12 bytes: dropped"}}}',
      '{"id":"4:0","event":{"type":"CUSTOM","name":"baton.raw","value":{"line":"x"}}}',
    ],
  },
];

for (const tc of malformed) {
  test(`malformed: ${tc.name} gives what Go gives`, () => {
    const p = new Projector("r", { dialect: "claude", maxLine: 12 });
    const evs = tc.chain.flatMap(([kind, data, headers], i) => p.project({ kind, seq: i + 1, data, headers }));
    const got = golden(evs);
    const want = Buffer.from(tc.want.map((l) => l + "\n").join(""));
    assert.ok(got.equals(want), firstDiff(got, want));
  });
}

test("malformed: invalid UTF-8 is \\ufffd in a string, passed through in JSON", () => {
  const p = new Projector("r", { dialect: "claude" });
  const evs = [
    ["status", '{"status":"started","runId":"r"}'],
    ["raw", Uint8Array.of(0x61, 0xff, 0x3c, 0x62)],
    ["events", Uint8Array.of(0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x3c, 0x22, 0x7d)],
  ].flatMap(([kind, data], i) => p.project({ kind, seq: i + 1, data }));
  const want = Buffer.concat([
    Buffer.from(runStarted + "\n"),
    Buffer.from('{"id":"2:0","event":{"type":"CUSTOM","name":"baton.raw","value":{"line":"a\\ufffd\\u003cb"}}}\n'),
    Buffer.from('{"id":"3:0","event":{"type":"RAW","event":{"a":"'),
    Buffer.from([0xc3]),
    Buffer.from('\\u003c"},"source":"claude"}}\n'),
  ]);
  const got = golden(evs);
  assert.ok(got.equals(want), firstDiff(got, want));
});

test("malformed: a status is read as Go's encoding/json reads it", () => {
  // time.Time takes what time.Parse(time.RFC3339) takes; an int no 1.0.
  const p = new Projector("r");
  const evs = [
    '{"status":"started","runId":"r"}',
    '{"status":"running","time":"2028-02-29T1:00:00,5+24:00"}',
    '{"status":"running","time":"2027-02-29T00:00:00Z"}',
    '{"status":"running","exitCode":1.0}',
  ].flatMap((data, i) => p.project({ kind: "status", seq: i + 1, data }));
  const want = [
    runStarted,
    '{"id":"2:0","event":{"type":"CUSTOM","name":"baton.running","value":{"status":"running","time":"2028-02-29T1:00:00,5+24:00"}}}',
    '{"id":"3:0","event":{"type":"RAW","event":{"status":"running","time":"2027-02-29T00:00:00Z"},"source":"baton"}}',
    '{"id":"4:0","event":{"type":"RAW","event":{"status":"running","exitCode":1.0},"source":"baton"}}',
  ];
  const got = golden(evs);
  assert.ok(got.equals(Buffer.from(want.map((l) => l + "\n").join(""))), firstDiff(got, Buffer.from(want.join("\n"))));
});

test("malformed: JSON nested past Go's 10000 levels is no JSON", () => {
  const p = new Projector("r", { dialect: "raw" });
  const ok = "[".repeat(10000) + "]".repeat(10000);
  const deep = "[".repeat(10001) + "]".repeat(10001);
  const evs = [ok, deep].flatMap((data, i) => p.project({ kind: "events", seq: i + 1, data }));
  assert.deepEqual(
    evs.map((e) => [String(e.pos), e.event.type, e.event.name ?? e.event.source]),
    [
      ["1:0", "RUN_STARTED", undefined],
      ["1:1", "RAW", "agent"],
      ["2:0", "CUSTOM", "baton.raw"],
    ],
  );
  assert.equal(evs[1].json, `{"type":"RAW","event":${ok},"source":"agent"}`);
});

// The state stays bounded, as the Go package's TestBounds checks: past
// 256 open streams the oldest is ended, past 256 tool calls waiting the
// oldest is given up.
test("bounds: 256 open streams, 256 tool calls waiting", () => {
  const lines = [
    ["status", '{"status":"started","runId":"r"}'],
    ["events", '{"type":"stream_event","event":{"type":"message_start","message":{"id":"m"}}}'],
  ];
  for (let i = 0; i < 300; i++) {
    lines.push([
      "events",
      `{"type":"stream_event","event":{"type":"content_block_start","index":${i},"content_block":{"type":"tool_use","id":"t${i}","name":"Bash"}}}`,
    ]);
  }
  lines.push(["status", '{"status":"succeeded","runId":"r"}']);
  const p = new Projector("r", { dialect: "claude" });
  const evs = [];
  let size = 0;
  let endsBefore = 0;
  lines.forEach(([kind, data], i) => {
    evs.push(...p.project({ kind, seq: i + 1, data }));
    if (i === lines.length - 2) {
      size = p.state().length;
      endsBefore = evs.filter((e) => e.event.type === "TOOL_CALL_END").length;
    }
  });
  const count = (pred) => evs.filter((e) => pred(e.event)).length;
  assert.equal(endsBefore, 44, "tool calls ended while 300 were open: want the 44 oldest");
  assert.equal(count((e) => e.type === "TOOL_CALL_END"), 300);
  assert.equal(count((e) => e.content === "no result: too many tool calls were waiting for theirs"), 44);
  assert.equal(count((e) => e.content === "no result: the run ended (succeeded)"), 256);
  assert.ok(size < 64 << 10, `the state of 300 open tool calls is ${size} bytes`);
  assert.equal(evs.at(-1).event.type, "RUN_FINISHED");
});

test("Position: parse, format, compare", () => {
  for (const s of ["1:0", "42:3", "18446744073709551615:7"]) assert.equal(Position.parse(s).toString(), s);
  for (const s of ["", "1", "1:", ":1", "a:1", "1:-1", "+1:2", "1:+2", "1:2:3", "-1:0", "18446744073709551616:0"]) {
    assert.throws(() => Position.parse(s), BadPositionError, s);
  }
  assert.ok(new Position(1n, 9).less(new Position(2n, 0)));
  assert.ok(!new Position(2n, 0).less(new Position(2n, 0)));
  assert.equal(Position.compare(new Position(3n, 1), new Position(3n, 0)), 1);
  assert.deepEqual(
    ["2:0", "1:5", "1:0"].map((s) => Position.parse(s)).sort(Position.compare).map(String),
    ["1:0", "1:5", "2:0"],
  );
});

test("parseDialect", () => {
  for (const d of ["", ...Dialects]) assert.equal(parseDialect(d), d);
  assert.throws(() => parseDialect("gemini"), (e) => e instanceof UnknownDialectError && e.message.includes("codex-app-server"));
});

test("a message at or before the last one read gives nothing", () => {
  const p = new Projector("r");
  assert.equal(p.project({ kind: "status", seq: 1, data: '{"status":"started","runId":"r"}' }).length, 1);
  assert.equal(p.project({ kind: "raw", seq: 2, data: "a" }).length, 1);
  assert.equal(p.project({ kind: "raw", seq: 2, data: "a" }).length, 0);
  assert.equal(p.project({ kind: "raw", seq: 1, data: "a" }).length, 0);
  assert.equal(p.project({ kind: "raw", seq: 0, data: "no seq" }).length, 0);
});

// The claude-policy fixture: an ask ends its turn with the interrupt
// outcome (every event parses with @ag-ui/core above), and each resume
// entry shape becomes the approve request the Go console sends.
test("approvals: interrupts of the policy fixture, resume entries as approve requests", () => {
  const f = fixtures.find((x) => x.name === "claude-policy");
  const evs = project(new Projector(f.runId, options(f)), chain(f.name));
  const outcomes = evs.filter((e) => e.event.type === "RUN_FINISHED").map((e) => e.event.outcome);
  const interrupts = outcomes.filter((o) => o.type === "interrupt");
  assert.equal(interrupts.length, 3);
  const first = interrupts[0].interrupts[0];
  assert.equal(first.id, "9b2e4d71-5c3a-4f08-8d6e-1f7a2c9b3d22");
  assert.equal(first.reason, "approval");
  assert.deepEqual(first.metadata, { runId: f.runId, tool: "Bash", target: "git push origin main", rule: "ask: Bash(git push*)" });
  assert.ok(first.toolCallId);
  assert.equal(interrupts[2].interrupts[0].toolCallId, undefined); // held: its tool call has its result
  const id = first.id;
  assert.deepEqual(resumeApproval({ interruptId: id, status: "resolved", payload: { approved: true } }, "me"), { id, allow: true, by: "me" });
  assert.deepEqual(resumeApproval({ interruptId: id, status: "resolved", payload: { approved: false, message: "no" } }, "me"),
    { id, allow: false, message: "no", by: "me" });
  assert.deepEqual(resumeApproval({ interruptId: id, status: "resolved", payload: true, metadata: { by: "carol" } }, "me"), { id, allow: true, by: "carol" });
  assert.deepEqual(resumeApproval({ interruptId: id, status: "cancelled" }, "me"),
    { id, allow: false, by: "me", message: "the person asked cancelled the request" });
  assert.throws(() => resumeApproval({ interruptId: id, status: "resolved", payload: { ok: 1 } }, "me"), BadResumeError);
  assert.throws(() => resumeApproval({ interruptId: id, status: "later" }, "me"), BadResumeError);
});
