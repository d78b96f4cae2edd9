// What the node tests share: the deployment js_test.go started (its
// addresses and credentials come in the environment), deadlines that say
// what they waited for, and unique run ids.

import { randomBytes } from "node:crypto";

/** The environment js_test.go sets; null when the tests run without it. */
export function deployment() {
  const url = process.env.BATON_JS_NATS_URL;
  if (!url) return null;
  const u = new URL(url);
  return {
    tcp: { servers: u.host, user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) },
    wsURL: process.env.BATON_JS_WS_URL,
    wsRun: process.env.BATON_JS_WS_RUN,
    wsToken: process.env.BATON_JS_WS_TOKEN,
    wsReadToken: process.env.BATON_JS_WS_READ_TOKEN,
    stateDir: process.env.BATON_JS_STATE_DIR,
    bin: process.env.BATON_BIN,
  };
}

export const skipReason = "needs the nats-server and worker that clients/js/js_test.go starts (go test ./clients/js/)";

/** withDeadline settles as p does, or rejects after ms saying what it waited for. */
export function withDeadline(p, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`waited ${ms} ms for ${what}`)), Math.max(ms, 1));
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** until takes events from a watch's iterator into seen until pred holds, within ms. */
export async function until(it, seen, pred, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const r = await withDeadline(it.next(), end - Date.now(), what);
    if (r.done) {
      throw new Error(`the run ended (${it.result?.status}) before ${what}; it showed:\n${show(seen)}`);
    }
    seen.push(r.value);
    if (pred(r.value)) return r.value;
  }
}

/** show lists events for a failure message, long lines cut. */
export function show(events) {
  return events.map((e) => `  ${e.seq} ${e.kind} ${e.text.length > 200 ? e.text.slice(0, 200) + `… (${e.data.length} bytes)` : e.text}`).join("\n");
}

/** A run id of its own for each run of the tests. */
export function runId(name) {
  return `${name}-${randomBytes(4).toString("hex")}`;
}

/** The status names of a watch's events, in order. */
export function statuses(events) {
  return events.filter((e) => e.kind === "status").map((e) => e.status.status);
}
