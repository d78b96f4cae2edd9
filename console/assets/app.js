// baton console: hand-written, no build step, no dependency. Every string
// that comes from a run goes into the page as text (textContent), never as
// HTML.
'use strict';

const main = document.getElementById('main');
let cfg = { readOnly: false, tokens: false };
let teardown = () => {};

// h builds an element: h('a', {href: '#/', class: 'x', text: 'hi'}, child...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') el.textContent = v;
    else if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return el;
}

async function api(path, opts = {}) {
  const headers = Object.assign({ 'X-Baton-Console': '1' }, opts.headers || {});
  const r = await fetch(path, Object.assign({ credentials: 'same-origin' }, opts, { headers }));
  if (r.status === 401) { location.href = 'login'; throw new Error('unauthorized'); }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw Object.assign(new Error(body.error || r.statusText), { status: r.status, rejected: !!body.rejected });
  return body;
}

// fmtTime shows a time in the browser's time zone, and names the zone.
function fmtTime(s) {
  if (!s) return '-';
  const d = new Date(s);
  return d.toLocaleString(undefined, { hour12: false, timeZoneName: 'short' });
}
// fmtDur shows a duration: "850 ms", "42 s", "3 min 5 s", "2 h 4 min", "3 d 2 h".
function fmtDur(ms) {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = Math.floor(ms / 1000), m = Math.floor(s / 60), hr = Math.floor(m / 60), d = Math.floor(hr / 24);
  if (s < 60) return `${s} s`;
  if (m < 60) return `${m} min ${s % 60} s`;
  if (hr < 24) return `${hr} h ${m % 60} min`;
  return `${d} d ${hr % 24} h`;
}
// fmtAgo shows how long ago a time was, in its largest unit: "5 min ago".
function fmtAgo(s) {
  const sec = Math.max(0, Math.floor((Date.now() - new Date(s).getTime()) / 1000));
  if (sec < 60) return `${sec} s ago`;
  if (sec < 3600) return `${Math.floor(sec / 60)} min ago`;
  if (sec < 86400) return `${Math.floor(sec / 3600)} h ago`;
  return `${Math.floor(sec / 86400)} d ago`;
}
// ago is a time as how long ago, its date and zone on hover; since is a
// run's duration, from its start to its end or, while it runs, to now.
// Both age on the page (tickTimes) between the page's reloads.
function ago(s) { return s ? h('span', { 'data-ago': s, title: fmtTime(s), text: fmtAgo(s) }) : '-'; }
function since(start, end) {
  if (!start) return '-';
  if (end) return fmtDur(new Date(end) - new Date(start));
  return h('span', { 'data-since': start, text: fmtDur(Date.now() - new Date(start)) });
}
function tickTimes() {
  for (const el of main.querySelectorAll('[data-ago]')) el.textContent = fmtAgo(el.dataset.ago);
  for (const el of main.querySelectorAll('[data-since]')) el.textContent = fmtDur(Date.now() - new Date(el.dataset.since));
}
setInterval(tickTimes, 1000);
function badge(state) { return h('span', { class: 'badge st-' + state, text: state }); }
const terminal = new Set(['succeeded', 'failed', 'cancelled', 'timeout', 'lost', 'paused']);

function setNav(name) {
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === name);
}

// ---------- runs list ----------

function listPage(params) {
  setNav('runs');
  const f = {
    state: params.get('state') || '', profile: params.get('profile') || '', node: params.get('node') || '',
    label: params.get('label') || '', q: params.get('q') || '', offset: +(params.get('offset') || 0),
  };
  const limit = 50;
  const stateSel = h('select', { name: 'state', 'aria-label': 'state' },
    ...['', 'active', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'timeout', 'lost', 'paused']
      .map(s => h('option', { value: s, text: s || 'any state', selected: s === f.state })));
  const profileSel = h('select', { name: 'profile', 'aria-label': 'profile' }, h('option', { value: '', text: 'any profile' }));
  const nodeSel = h('select', { name: 'node', 'aria-label': 'node' }, h('option', { value: '', text: 'any node' }));
  const label = h('input', { name: 'label', placeholder: 'label key=value', value: f.label });
  const search = h('input', { name: 'q', id: 'search', placeholder: 'search runId', value: f.q, type: 'search' });
  const summary = h('span', { class: 'muted' });
  const prev = h('button', { text: '‹ newer' });
  const next = h('button', { text: 'older ›' });
  const tbody = h('tbody');
  const errLine = h('p', { class: 'error' });
  const counts = h('div', { class: 'counts', id: 'counts' });
  // Runs ticked for cancel, kept across the reloads of the page.
  const selected = new Set();
  const cancelSel = h('button', { class: 'danger', id: 'cancel-selected', type: 'button', hidden: true });
  const cancelNote = h('span', { class: 'muted', id: 'cancel-note' });
  main.replaceChildren(
    h('h1', { text: 'Runs' }),
    h('form', { class: 'filters', onsubmit: e => { e.preventDefault(); apply(); } },
      stateSel, profileSel, nodeSel, label, search, h('button', { type: 'submit', text: 'Filter' }), cancelSel, cancelNote),
    counts, errLine,
    h('table', { id: 'runs' }, h('thead', {}, h('tr', {},
      ...['', 'run', 'state', 'profile', 'node', 'worker', 'attempt', 'created', 'finished', 'duration', 'exit'].map(t => h('th', { text: t })))),
      tbody),
    h('div', { class: 'pager' }, prev, next, summary));

  function showCancelSel() {
    cancelSel.hidden = !selected.size;
    cancelSel.textContent = `Cancel ${selected.size} selected`;
  }
  // Each run's cancel is its own request: one refused (ended meanwhile)
  // leaves the others requested.
  cancelSel.onclick = async () => {
    const ids = [...selected];
    if (!confirm(`Cancel ${ids.length} runs?\n` + ids.join('\n'))) return;
    cancelSel.disabled = true;
    const failed = [];
    await Promise.all(ids.map(id => api('api/runs/' + encodeURIComponent(id) + '/cancel', { method: 'POST' })
      .then(() => selected.delete(id), e => failed.push(id + ': ' + (e.message || e)))));
    cancelNote.textContent = `cancel requested for ${ids.length - failed.length} of ${ids.length} runs`;
    errLine.textContent = failed.length ? 'cancel ' + failed.join('; ') : '';
    cancelSel.disabled = false;
    showCancelSel();
    load();
  };

  // listHref is this list with another state chosen.
  function listHref(state) {
    const p = new URLSearchParams();
    for (const k of ['profile', 'node', 'label', 'q']) if (f[k]) p.set(k, f[k]);
    if (state) p.set('state', state);
    return '#/?' + p.toString();
  }
  const stateOrder = ['starting', 'running', 'succeeded', 'failed', 'cancelled', 'timeout', 'lost', 'paused'];
  function showCounts(states) {
    const all = Object.values(states).reduce((a, b) => a + b, 0);
    const seen = [...stateOrder, ...Object.keys(states).filter(s => !stateOrder.includes(s)).sort()].filter(s => states[s]);
    counts.replaceChildren(
      h('a', { href: listHref(''), class: f.state ? '' : 'active', 'data-state': '' }, `all ${all.toLocaleString()}`),
      ...seen.map(s => h('a', { href: listHref(s), class: f.state === s ? 'active' : '', 'data-state': s },
        badge(s), ' ' + states[s].toLocaleString())));
  }

  function apply(offset = 0) {
    const p = new URLSearchParams();
    for (const [k, v] of [['state', stateSel.value], ['profile', profileSel.value], ['node', nodeSel.value],
      ['label', label.value.trim()], ['q', search.value.trim()]]) if (v) p.set(k, v);
    if (offset) p.set('offset', offset);
    location.hash = '#/?' + p.toString();
  }
  for (const el of [stateSel, profileSel, nodeSel]) el.addEventListener('change', () => apply());
  let searchTimer;
  search.addEventListener('input', () => { clearTimeout(searchTimer); searchTimer = setTimeout(() => apply(), 300); });
  prev.onclick = () => apply(Math.max(0, f.offset - limit));
  next.onclick = () => apply(f.offset + limit);

  let loading = false, again = false;
  async function load() {
    if (loading) { again = true; return; }
    loading = true;
    try {
      const q = new URLSearchParams({ offset: f.offset, limit });
      for (const k of ['state', 'profile', 'node', 'label', 'q']) if (f[k]) q.set(k, f[k]);
      const pg = await api('api/runs?' + q.toString());
      fillSelect(profileSel, pg.profiles, f.profile, 'any profile');
      fillSelect(nodeSel, pg.nodes, f.node, 'any node');
      errLine.textContent = pg.error || '';
      showCounts(pg.states || {});
      const tick = r => {
        if (cfg.readOnly || terminal.has(r.state)) { selected.delete(r.runId); return null; }
        const box = h('input', { type: 'checkbox', 'aria-label': 'select ' + r.runId, checked: selected.has(r.runId) });
        box.onchange = () => { if (box.checked) selected.add(r.runId); else selected.delete(r.runId); showCancelSel(); };
        return box;
      };
      const rows = pg.runs.map(r => h('tr', { 'data-run': r.runId },
        h('td', {}, tick(r)),
        h('td', {}, h('a', { href: '#/runs/' + encodeURIComponent(r.runId), class: 'mono', text: r.runId })),
        h('td', {}, badge(r.state), r.cancelRequested && !terminal.has(r.state) ? h('span', { class: 'muted', text: ' cancelling' }) : null),
        h('td', { text: r.profile || '-' }), h('td', { text: r.node || '-' }), h('td', { text: r.worker || '-' }),
        h('td', { text: String(r.attempt) }), h('td', {}, ago(r.createdAt)), h('td', {}, ago(r.finishedAt)),
        h('td', {}, terminal.has(r.state) && !r.finishedAt ? '-' : since(r.startedAt, r.finishedAt)),
        h('td', { text: r.exitCode === undefined ? '-' : String(r.exitCode) })));
      tbody.replaceChildren(...rows);
      showCancelSel();
      const first = pg.total ? pg.offset + 1 : 0;
      summary.textContent = `${first}–${pg.offset + pg.runs.length} of ${pg.total.toLocaleString()}` +
        (pg.total !== pg.all ? ` matching (${pg.all.toLocaleString()} runs)` : ' runs');
      prev.disabled = pg.offset === 0;
      next.disabled = pg.offset + pg.runs.length >= pg.total;
    } catch (e) {
      errLine.textContent = String(e.message || e);
    } finally {
      loading = false;
      if (again) { again = false; load(); }
    }
  }
  load();
  const live = new EventSource('api/runs/live');
  live.addEventListener('changed', () => load());
  return () => live.close();
}

function fillSelect(sel, values, chosen, anyText) {
  const want = ['', ...values];
  if (chosen && !values.includes(chosen)) want.push(chosen);
  const have = [...sel.options].map(o => o.value);
  if (have.join('\n') === want.join('\n')) return;
  sel.replaceChildren(...want.map(v => h('option', { value: v, text: v || anyText, selected: v === chosen })));
}

// ---------- run page ----------

// MAX_ENTRIES bounds the transcript's DOM: older entries are dropped from
// the page (the chain keeps them) so a run printing 1,000 lines/s stays
// smooth for as long as it runs.
const MAX_ENTRIES = 1000;

function runPage(runId) {
  setNav('runs');
  const state = { info: null, terminal: null, waiting: false, lastSeq: 0, closed: false };
  const head = h('div', { class: 'run-head' });
  const transcript = h('div', { id: 'transcript', class: 'card' });
  const hiddenNote = h('div', { class: 'hidden-note' });
  const timeline = h('ol', { class: 'timeline', id: 'timeline' });
  const stderr = h('div', { class: 'stderr' });
  const outputs = h('div', { id: 'outputs' });
  const inputBox = h('div', { class: 'inputbox', hidden: true });
  const tokenBox = h('div', { class: 'token' });
  const errLine = h('p', { class: 'error' });
  const workersLine = h('p', { class: 'error', id: 'no-worker' });
  const cancelBtn = h('button', { class: 'danger', id: 'cancel', text: 'Cancel run', hidden: true });
  const rerunBox = h('div', { id: 'rerun' });
  const actions = h('div', { class: 'card', id: 'actions', hidden: true }, cancelBtn, rerunBox, tokenBox);
  const follow = h('input', { type: 'checkbox', checked: true, id: 'follow' });
  main.replaceChildren(
    h('p', {}, h('a', { href: '#/', text: '‹ runs' })),
    head, errLine, workersLine,
    h('div', { class: 'run-grid' },
      h('section', {},
        h('div', { class: 'pager' }, h('label', {}, follow, ' follow'), h('span', { class: 'muted', id: 'count' })),
        transcript, inputBox),
      h('aside', {},
        actions,
        h('h2', { text: 'Timeline' }), h('div', { class: 'card' }, timeline),
        outputs, stderr)));
  transcript.append(hiddenNote);

  const r = new Renderer(transcript, hiddenNote);
  let queue = [];
  let frame = 0;
  let shown = 0;
  const count = document.getElementById('count');

  function renderHead() {
    const run = state.info.run;
    const st = state.terminal ? state.terminal.status : run.state;
    head.replaceChildren(
      h('h1', { class: 'mono', text: run.runId }), badge(st),
      h('dl', {}, ...[['profile', run.profile], ...(run.session ? [['session', sessionLink(run.session)]] : []), ['node', run.node], ['worker', run.worker], ['attempt', run.attempt],
        ['created', fmtTime(run.createdAt)], ['started', fmtTime(run.startedAt)], ['finished', fmtTime(run.finishedAt)],
        ['duration', terminal.has(st) && !run.finishedAt ? '-' : since(run.startedAt, run.finishedAt)]]
        .flatMap(([k, v]) => [h('dt', { text: k }),
          v instanceof Node ? h('dd', { 'data-field': k }, v) : h('dd', { 'data-field': k, text: v === undefined || v === '' ? '-' : String(v) })])));
    const ended = !!state.terminal || terminal.has(run.state);
    cancelBtn.hidden = cfg.readOnly || state.info.readOnly || ended;
    showActions();
    const wantInput = !cfg.readOnly && !state.info.readOnly && !ended && (state.info.interactive || state.waiting);
    if (wantInput && inputBox.hidden) showInput();
    inputBox.hidden = !wantInput;
  }

  function showInput() {
    const ta = h('textarea', { id: 'input', placeholder: 'Send input to the agent' });
    const btn = h('button', { text: 'Send' });
    const note = h('span', { class: 'muted' });
    btn.onclick = async () => {
      if (!ta.value) return;
      btn.disabled = true;
      try {
        await api('api/runs/' + encodeURIComponent(runId) + '/input', { method: 'POST', body: ta.value });
        ta.value = ''; note.textContent = 'sent';
      } catch (e) { note.textContent = String(e.message || e); }
      btn.disabled = false;
    };
    inputBox.replaceChildren(h('h2', { text: 'Input' }), ta, h('div', {}, btn, ' ', note));
  }

  cancelBtn.onclick = async () => {
    if (!confirm('Cancel run ' + runId + '?')) return;
    cancelBtn.disabled = true;
    try {
      const rep = await api('api/runs/' + encodeURIComponent(runId) + '/cancel', { method: 'POST' });
      cancelBtn.textContent = 'Cancel requested';
      errLine.textContent = '';
      state.info.run.cancelRequested = true;
      void rep;
    } catch (e) {
      errLine.textContent = 'cancel: ' + (e.message || e);
      cancelBtn.disabled = false;
    }
  };

  // The card of the cancel button and the token buttons shows only when
  // it holds one of them: a finished run without tokens has neither.
  function showActions() { actions.hidden = cancelBtn.hidden && !rerunBox.childElementCount && !tokenBox.childElementCount; }

  // Re-run needs the job, which a run's record keeps unless it was too
  // large: such a run says so instead of offering it.
  function showRerun() {
    if (cfg.readOnly || state.info.readOnly) return;
    if (!state.info.rerun) {
      rerunBox.replaceChildren(h('p', { class: 'muted', text: 'No re-run: its record keeps no job (a worker keeps one of up to 256 KiB).' }));
      return;
    }
    const btn = h('button', { id: 'rerun-button', text: 'Re-run' });
    const note = h('span', { class: 'muted', id: 'rerun-note' });
    btn.onclick = async () => {
      if (!confirm('Run the job of ' + runId + ' again, as a new run?')) return;
      btn.disabled = true;
      try {
        const rep = await api('api/runs/' + encodeURIComponent(runId) + '/rerun', { method: 'POST' });
        note.replaceChildren('started as ', h('a', { href: '#/runs/' + encodeURIComponent(rep.runId), class: 'mono', text: rep.runId }));
      } catch (e) { note.textContent = 're-run: ' + (e.message || e); }
      btn.disabled = false;
    };
    rerunBox.replaceChildren(btn, ' ', note);
  }

  function showToken() {
    if (!cfg.tokens) return;
    const out = h('div');
    const get = async (input) => {
      try {
        const t = await api('api/runs/' + encodeURIComponent(runId) + '/token' + (input ? '?input=1' : ''));
        out.replaceChildren(h('p', { class: 'muted', text: 'NATS user JWT (WebSocket only), expires ' + fmtTime(t.expires) }),
          h('textarea', { readonly: true, text: t.jwt }));
      } catch (e) { out.replaceChildren(h('p', { class: 'error', text: String(e.message || e) })); }
    };
    tokenBox.replaceChildren(h('h2', { text: 'Browser credential' }),
      h('button', { text: 'Read token', onclick: () => get(false) }), ' ',
      cfg.readOnly ? null : h('button', { text: 'Read + input token', onclick: () => get(true) }), out);
    showActions();
  }

  function onStatus(st) {
    const cls = st.status === 'handoff' ? 'handoff' : st.status === 'attached' ? 'attached' : terminal.has(st.status) ? 'terminal' : '';
    const bits = [st.worker && 'worker ' + st.worker, st.node && 'node ' + st.node, st.epoch && 'epoch ' + st.epoch,
      st.attempt && 'attempt ' + st.attempt, st.exitCode !== undefined && 'exit ' + st.exitCode, st.signal && 'signal ' + st.signal,
      st.reason && st.reason].filter(Boolean);
    timeline.append(h('li', { class: cls, 'data-status': st.status }, badge(st.status), ' ', h('span', { text: bits.join(' · ') }),
      h('div', { class: 'when', text: fmtTime(st.time) })));
    const run = state.info && state.info.run;
    if (run) { // the header follows the chain, which is ahead of the record
      if (st.status === 'started' || st.status === 'attached' || st.status === 'running') {
        run.state = 'running';
        run.worker = st.worker || run.worker;
        run.startedAt = run.startedAt || st.time;
      } else if (st.status === 'waiting') {
        run.state = 'waiting';
      } else if (terminal.has(st.status)) {
        run.state = st.status;
        run.finishedAt = st.time;
      }
    }
    if (st.status === 'waiting') state.waiting = true;
    if (st.status === 'started' || st.status === 'attached' || st.status === 'running') state.waiting = false;
    if (terminal.has(st.status)) {
      state.terminal = st;
      if (st.stderrTail) stderr.replaceChildren(h('h2', { text: 'stderr (tail)' }), h('pre', { text: st.stderrTail }));
      if (Array.isArray(st.outputs) && st.outputs.length) {
        outputs.replaceChildren(h('h2', { text: 'Outputs' }), h('ul', {}, ...st.outputs.map(o => h('li', {},
          h('a', { href: 'api/runs/' + encodeURIComponent(runId) + '/outputs/' + o.name.split('/').map(encodeURIComponent).join('/'), text: o.path || o.name }),
          h('span', { class: 'muted', text: ` ${o.size} bytes ${o.digest || ''}` })))));
      }
    }
    if (state.info) renderHead();
  }

  function flush() {
    frame = 0;
    const atBottom = transcript.scrollTop + transcript.clientHeight >= transcript.scrollHeight - 40;
    const batch = queue;
    queue = [];
    for (const ev of batch) {
      if (ev.kind === 'status') {
        let st = null;
        try { st = JSON.parse(ev.data); } catch (_) { /* shown raw below */ }
        if (st) { onStatus(st); r.marker(st); continue; }
      }
      r.add(ev);
    }
    shown += batch.length;
    count.textContent = shown.toLocaleString() + ' messages';
    if (follow.checked && atBottom) transcript.scrollTop = transcript.scrollHeight;
  }

  // The chain arrives as server-sent events whose ids are stream
  // sequences: the browser's EventSource reconnects with Last-Event-ID,
  // and a reconnect made here (after a refused or failed stream, as while
  // NATS cannot be reached) asks for what comes after the last sequence
  // shown. A sequence seen twice is dropped.
  let es = null, retry = 0, streamErr = false, workersTimer = 0, noRecordSince = 0;
  function connect() {
    const url = 'api/runs/' + encodeURIComponent(runId) + '/events' + (state.lastSeq ? '?after=' + state.lastSeq : '');
    es = new EventSource(url);
    es.onmessage = e => {
      const ev = JSON.parse(e.data);
      if (ev.seq <= state.lastSeq) return;
      state.lastSeq = ev.seq;
      queue.push(ev);
      if (!frame) frame = requestAnimationFrame(flush);
    };
    es.addEventListener('end', () => { es.close(); state.closed = true; });
    // The console watches the chain again: a failure shown is over.
    es.addEventListener('watching', () => {
      if (streamErr) errLine.textContent = '';
      streamErr = false;
      clearTimeout(workersTimer); // a new stream says it again if so
      workersLine.textContent = '';
    });
    // No worker answers the console's reads of the chain (none runs, or
    // the only one crashed): said once it lasts 3 s, as baton watch does
    // (a restarted worker answers within a second or two).
    es.addEventListener('workers', e => {
      clearTimeout(workersTimer);
      if (JSON.parse(e.data).answering) { workersLine.textContent = ''; return; }
      workersTimer = setTimeout(() => {
        workersLine.textContent = 'No worker answers (is a baton worker running?): waiting for one; the run\'s agent goes on meanwhile.';
      }, 3000);
    });
    es.addEventListener('failure', e => {
      es.close();
      clearTimeout(workersTimer); // whether workers answer is unknown until the stream is on again
      workersLine.textContent = '';
      errLine.textContent = 'stream: ' + JSON.parse(e.data).error;
      streamErr = true;
      if (!state.closed) retry = setTimeout(connect, 2000);
    });
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED && !state.closed) {
        retry = setTimeout(connect, 1000);
      }
    };
  }

  // A job just submitted has no record until a worker takes it: wait for
  // it rather than end on "not found".
  function open() {
    api('api/runs/' + encodeURIComponent(runId)).then(info => {
      errLine.textContent = '';
      state.info = info;
      renderHead();
      showRerun();
      showToken();
      // The job's own input (its first 1 KiB) is the run's first turn.
      if (info.input) r.push(h('div', { class: 'entry user', id: 'job-input' }, h('div', { class: 'text', text: 'you › ' + inputText(info.input.replace(/\r?\n$/, '')) })));
      connect();
    }).catch(e => {
      if (e.status === 404 && !state.closed) {
        // A worker takes a job in milliseconds: that none has is said only
        // once it lasts 3 s, as baton watch does.
        noRecordSince = noRecordSince || Date.now();
        // A job the DLQ took gets no record, unless it is retried.
        if (e.rejected) errLine.textContent = e.message;
        else if (Date.now() - noRecordSince >= 3000) errLine.textContent = 'no record yet: waiting for a worker to take the run';
        retry = setTimeout(open, e.rejected ? 2000 : 500);
        return;
      }
      errLine.textContent = String(e.message || e);
    });
  }
  open();

  return () => {
    state.closed = true;
    clearTimeout(retry);
    clearTimeout(workersTimer);
    if (es) es.close();
    if (frame) cancelAnimationFrame(frame);
  };
}

// Renderer turns a run's messages into transcript entries. It knows Claude
// Code's stream-json: assistant text assembled from stream_event deltas
// (replaced by the whole message when it arrives), tool calls with their
// input and, once the user message carries it, their result; the result
// line with turns and cost. Any other JSON is collapsible, and raw lines
// are text.
class Renderer {
  constructor(root, hiddenNote) {
    this.root = root;
    this.note = hiddenNote;
    this.hidden = 0;
    this.msgs = new Map();   // message id -> {el, blocks: Map(index -> {text|input node})}
    this.tools = new Map();  // tool_use id -> element
    this.cur = null;         // the message stream_event deltas go to
  }

  push(el) {
    this.root.append(el);
    // +1: the hidden note is the first child.
    while (this.root.childElementCount > MAX_ENTRIES + 1) {
      const old = this.note.nextElementSibling;
      if (old.dataset.tool) this.tools.delete(old.dataset.tool);
      if (old.dataset.msg) this.msgs.delete(old.dataset.msg);
      old.remove();
      this.hidden++;
    }
    if (this.hidden) this.note.textContent = `${this.hidden.toLocaleString()} earlier entries not shown`;
    return el;
  }

  marker(st) {
    const who = [st.worker, st.epoch && 'epoch ' + st.epoch].filter(Boolean).join(', ');
    this.push(h('div', { class: 'marker ' + st.status, text: `— ${st.status}${who ? ' (' + who + ')' : ''} —` }));
  }

  add(ev) {
    if (ev.kind === 'input') {
      this.input(ev);
      return;
    }
    if (ev.kind !== 'events') {
      this.push(h('div', { class: 'entry raw mono', text: ev.data }));
      return;
    }
    let m;
    try { m = JSON.parse(ev.data); } catch (_) { m = null; }
    if (!m || typeof m !== 'object' || Array.isArray(m)) {
      this.push(h('div', { class: 'entry raw mono', text: ev.data }));
      return;
    }
    const note = controlNote(m);
    if (note) {
      this.push(h('div', { class: 'entry prompt', text: note }));
      return;
    }
    switch (m.type) {
      case 'stream_event': if (this.streamEvent(m.event || {})) return; break;
      case 'assistant': if (this.assistant(m.message || {})) return; break;
      case 'user': if (this.user(m.message || {})) return; break;
      case 'result': this.result(m); return;
      case 'system':
        if (m.subtype === 'init') {
          this.push(h('div', { class: 'marker', text: ['session', [m.session_id, m.model, m.cwd].filter(Boolean).join(' · ')].join(' ').trim() }));
          return;
        }
        break;
    }
    this.json(m);
  }

  json(m) {
    const label = [m.type, m.subtype || (m.event && m.event.type)].filter(Boolean).join(' · ') || 'JSON';
    this.push(h('details', { class: 'entry json' }, h('summary', { text: label }), h('pre', { text: JSON.stringify(m, null, 2) })));
  }

  message(id) {
    let msg = this.msgs.get(id);
    if (!msg) {
      const el = h('div', { class: 'entry assistant', 'data-msg': id });
      msg = { el, blocks: new Map() };
      this.msgs.set(id, msg);
      this.push(el);
    }
    return msg;
  }

  textBlock(msg, index) {
    let b = msg.blocks.get(index);
    if (!b) {
      const node = document.createTextNode('');
      msg.el.append(h('div', { class: 'text' }, node));
      b = { text: node };
      msg.blocks.set(index, b);
    }
    return b;
  }

  toolBlock(id, name, input) {
    const inputPre = h('pre', { text: input });
    const el = h('details', { class: 'tool', 'data-tool': id },
      h('summary', {}, h('span', { class: 'name', text: name || 'tool' }), ' ', h('span', { class: 'muted mono', text: summarize(input) })),
      inputPre);
    if (id) this.tools.set(id, el);
    return { el, input: inputPre };
  }

  streamEvent(e) {
    switch (e.type) {
      case 'message_start':
        this.cur = this.message((e.message && e.message.id) || 'msg-' + Math.random());
        return true;
      case 'content_block_start': {
        const msg = this.cur || (this.cur = this.message('msg-' + Math.random()));
        const cb = e.content_block || {};
        if (cb.type === 'tool_use') {
          const t = this.toolBlock(cb.id, cb.name, '');
          msg.el.append(t.el);
          msg.blocks.set(e.index, t);
        } else if (cb.type === 'text') {
          this.textBlock(msg, e.index).text.appendData(cb.text || '');
        }
        return true;
      }
      case 'content_block_delta': {
        const msg = this.cur || (this.cur = this.message('msg-' + Math.random()));
        const d = e.delta || {};
        if (d.type === 'text_delta') {
          this.textBlock(msg, e.index).text.appendData(d.text || '');
          return true;
        }
        if (d.type === 'input_json_delta') {
          const b = msg.blocks.get(e.index);
          if (b && b.input) { b.input.textContent += d.partial_json || ''; return true; }
        }
        return false;
      }
      case 'content_block_stop': case 'message_delta': case 'message_stop': case 'ping':
        return true;
    }
    return false;
  }

  // assistant renders a whole assistant message, in place of the one its
  // deltas built.
  assistant(message) {
    if (!Array.isArray(message.content)) return false;
    const msg = this.message(message.id || 'msg-' + Math.random());
    msg.el.replaceChildren();
    msg.blocks.clear();
    message.content.forEach((b, i) => {
      if (b.type === 'text') {
        this.textBlock(msg, i).text.appendData(b.text || '');
      } else if (b.type === 'tool_use') {
        const t = this.toolBlock(b.id, b.name, JSON.stringify(b.input, null, 2));
        msg.el.append(t.el);
        msg.blocks.set(i, t);
      } else if (b.type === 'thinking') {
        msg.el.append(h('details', { class: 'json' }, h('summary', { text: 'thinking' }), h('pre', { text: b.thinking || '' })));
      } else {
        msg.el.append(h('details', { class: 'json' }, h('summary', { text: b.type || 'block' }), h('pre', { text: JSON.stringify(b, null, 2) })));
      }
    });
    if (this.cur === msg) this.cur = null;
    return true;
  }

  user(message) {
    const c = message.content;
    if (typeof c === 'string') {
      this.push(h('div', { class: 'entry user' }, h('div', { class: 'text', text: c })));
      return true;
    }
    if (!Array.isArray(c)) return false;
    for (const b of c) {
      if (b.type === 'tool_result') {
        const text = typeof b.content === 'string' ? b.content
          : Array.isArray(b.content) ? b.content.map(x => x.text || JSON.stringify(x)).join('\n') : JSON.stringify(b.content);
        const pre = h('pre', { class: 'result', text: text.length > 20000 ? text.slice(0, 20000) + '\n… (cut)' : text });
        const tool = this.tools.get(b.tool_use_id);
        if (tool) {
          tool.append(pre);
          if (b.is_error) tool.classList.add('err');
        } else {
          this.push(h('details', { class: 'entry tool' + (b.is_error ? ' err' : '') }, h('summary', { text: 'tool result' }), pre));
        }
      } else if (b.type === 'text') {
        this.push(h('div', { class: 'entry user' }, h('div', { class: 'text', text: b.text || '' })));
      }
    }
    return true;
  }

  // input shows a message written to the agent's stdin as the user's
  // turn, as baton watch does: a user message's text, the answer to a
  // permission prompt, an interrupt, the end of input; other lines as
  // they were written.
  input(ev) {
    const you = text => this.push(h('div', { class: 'entry user' }, h('div', { class: 'text', text: 'you › ' + text })));
    if (ev.interrupt) { you('interrupt'); return; }
    const line = ev.data.replace(/\r?\n$/, '');
    if (line) you(inputText(line));
    if (ev.eof) you('end of input (the agent\'s stdin is closed)');
  }

  result(m) {
    const bad = m.is_error || (m.subtype && m.subtype !== 'success');
    const bits = [m.subtype, m.num_turns !== undefined && `${m.num_turns} turns`,
      typeof m.total_cost_usd === 'number' && `$${m.total_cost_usd.toFixed(4)}`,
      m.duration_ms !== undefined && `${(m.duration_ms / 1000).toFixed(1)} s`].filter(Boolean);
    this.push(h('div', { class: 'entry result-line' + (bad ? ' err' : ''), 'data-result': '1' },
      h('strong', { text: 'result ' }), h('span', { text: bits.join(' · ') }),
      typeof m.result === 'string' ? h('div', { class: 'text', text: m.result }) : null));
  }
}

// inputText is an input line for a person: a stream-json user message's
// text, an answer to a permission prompt (Claude Code's control_response,
// Codex's decision), or the line as it was written.
function inputText(line) {
  let m;
  try { m = JSON.parse(line); } catch (_) { return line; }
  if (!m || typeof m !== 'object') return line;
  if (m.type === 'user' && m.message) {
    const c = m.message.content;
    if (typeof c === 'string') return c;
    const text = Array.isArray(c) ? c.filter(b => b && b.type === 'text').map(b => b.text || '').join('') : '';
    if (text) return text;
  }
  const r = m.type === 'control_response' && m.response && m.response.response;
  if (r && r.behavior) {
    return (r.behavior === 'allow' ? 'allow ' : 'deny ') + m.response.request_id + (r.behavior !== 'allow' && r.message ? ': ' + r.message : '');
  }
  if (m.id !== undefined && m.result && typeof m.result.decision === 'string') {
    return (m.result.decision.startsWith('accept') ? 'allow ' : 'deny ') + m.id + (m.result.decision.startsWith('accept') ? '' : ': ' + m.result.decision);
  }
  return line;
}

// controlNote is an agent's line about a permission prompt or a control
// request, as one line, as baton watch shows it: a prompt (Claude Code's
// can_use_tool, Codex's */requestApproval), a prompt an interrupt withdrew,
// the agent's answer to a control request written to it (the interrupt
// line); '' for any other line.
function controlNote(m) {
  if (m.type === 'control_request' && m.request && m.request.subtype === 'can_use_tool') {
    return `? ${m.request.tool_name} asks: ${summarize(JSON.stringify(m.request.input || {}))}  [request ${m.request_id}]`;
  }
  if (typeof m.method === 'string' && m.method.endsWith('/requestApproval') && m.id !== undefined) {
    const p = m.params || {};
    return `? ${m.method.replace(/^item\//, '').replace(/\/requestApproval$/, '')} asks: ${String(p.command || p.reason || '').slice(0, 200)}  [request ${m.id}]`;
  }
  if (m.type === 'control_cancel_request' && m.request_id !== undefined) {
    return `? request ${m.request_id} withdrawn: the agent no longer waits for its answer`;
  }
  if (m.method === 'serverRequest/resolved' && m.params && m.params.requestId !== undefined) {
    return `request ${m.params.requestId} settled`;
  }
  if (m.type === 'control_response' && m.response) {
    const r = m.response;
    return r.subtype === 'error' || r.error ? `↳ the agent refused request ${r.request_id}: ${r.error || ''}` : `↳ the agent took request ${r.request_id}`;
  }
  return '';
}

function summarize(input) {
  try {
    const o = JSON.parse(input);
    const v = o.command || o.file_path || o.path || o.pattern || o.url || '';
    return String(v).slice(0, 120);
  } catch (_) { return ''; }
}

// ---------- workers ----------

function workersPage() {
  setNav('workers');
  const body = h('div');
  main.replaceChildren(h('h1', { text: 'Workers' }), body);
  let timer;
  async function load() {
    try {
      const d = await api('api/workers');
      body.replaceChildren(
        ...(d.errors || []).map(e => h('p', { class: 'muted', text: e })),
        h('table', { id: 'workers' }, h('thead', {}, h('tr', {}, ...['worker', 'node', 'version', 'concurrency', 'runs held'].map(t => h('th', { text: t })))),
          h('tbody', {}, ...d.workers.map(w => h('tr', {},
            h('td', { class: 'mono', text: w.id }), h('td', { text: w.node }), h('td', { text: w.version }),
            h('td', { text: w.status ? String(w.status.concurrency) : '-' }),
            h('td', { class: 'wrap' }, w.error ? h('span', { class: 'error', text: w.error }) : null,
              ...((w.status && w.status.runs) || []).flatMap(r => [h('a', { href: '#/runs/' + encodeURIComponent(r.runId), class: 'mono', text: r.runId }),
                h('span', { class: 'muted', text: ` epoch ${r.epoch}  ` })])))))),
        h('h2', { text: 'Nodes' }),
        h('table', { id: 'nodes' }, h('thead', {}, h('tr', {}, ...['node', 'workers', 'capacity', 'version', 'heartbeat'].map(t => h('th', { text: t })))),
          h('tbody', {}, ...d.nodes.map(n => h('tr', {},
            h('td', { class: 'mono', text: n.id }), h('td', { text: String(n.workers) }), h('td', { text: String(n.capacity) }),
            h('td', { text: n.version }), h('td', { text: n.age + ' ago' }))))));
    } catch (e) { body.replaceChildren(h('p', { class: 'error', text: String(e.message || e) })); }
    timer = setTimeout(load, 5000);
  }
  load();
  return () => clearTimeout(timer);
}

// ---------- dead letters ----------

function dlqPage() {
  setNav('dlq');
  const body = h('div');
  main.replaceChildren(h('h1', { text: 'Dead letters' }), h('p', { class: 'muted', text: 'Jobs the workers rejected, newest first.' }), body);
  // Retry submits the entry's job again (it stays listed); delete removes
  // it, which needs the console's NATS user to administer the DLQ stream.
  // Either says on the entry's row what came of it, a refusal's sentence
  // included.
  function act(e, note, how) {
    const path = 'api/dlq/' + e.seq + (how === 'retry' ? '/retry' : '');
    return async () => {
      if (how === 'delete' && !confirm(`Delete dead letter ${e.seq}?`)) return;
      try {
        const rep = await api(path, { method: how === 'retry' ? 'POST' : 'DELETE' });
        if (how === 'retry') note.replaceChildren('submitted again as run ', h('a', { href: '#/runs/' + encodeURIComponent(rep.runId), class: 'mono', text: rep.runId }));
        else load();
      } catch (err) { note.replaceChildren(h('span', { class: 'error', text: how + ': ' + (err.message || err) })); }
    };
  }
  function load() {
    api('api/dlq').then(list => {
      if (!list.length) {
        body.replaceChildren(h('p', { id: 'dlq-empty', text: 'No rejected jobs: the dead-letter stream is empty.' }));
        return;
      }
      body.replaceChildren(h('table', { id: 'dlq' },
        h('thead', {}, h('tr', {}, ...['seq', 'time', 'reason', 'error', 'subject', 'job', ''].map(t => h('th', { text: t })))),
        h('tbody', {}, ...list.map(e => {
          const note = h('div', { class: 'wrap note' });
          return h('tr', { 'data-seq': e.seq },
            h('td', { text: String(e.seq) }), h('td', { text: fmtTime(e.time) }), h('td', {}, h('span', { class: 'badge st-failed', text: e.reason })),
            h('td', { class: 'wrap', text: e.error }), h('td', { class: 'mono', text: e.subject }),
            h('td', { class: 'wrap' }, h('details', { class: 'json' }, h('summary', { text: e.msgId || 'payload' }), h('pre', { text: e.payload }))),
            h('td', { class: 'wrap' }, cfg.readOnly ? null : h('button', { class: 'retry', text: 'Retry', onclick: act(e, note, 'retry') }), ' ',
              cfg.readOnly ? null : h('button', { class: 'delete', text: 'Delete', onclick: act(e, note, 'delete') }), note));
        }))));
    }).catch(e => body.replaceChildren(h('p', { class: 'error', text: String(e.message || e) })));
  }
  load();
  return () => {};
}

// ---------- sessions ----------

function sessionLink(id) { return h('a', { href: '#/sessions/' + encodeURIComponent(id), class: 'mono', text: id }); }
function runLink(id) { return h('a', { href: '#/runs/' + encodeURIComponent(id), class: 'mono', text: id }); }
function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  const u = ['KiB', 'MiB', 'GiB', 'TiB'];
  let i = -1;
  do { n /= 1024; i++; } while (n >= 1024 && i < u.length - 1);
  return `${n.toFixed(n < 10 ? 1 : 0)} ${u[i]}`;
}
function labelText(labels) { return Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(' '); }

function sessionsPage(params) {
  setNav('sessions');
  const label = h('input', { id: 'session-label', placeholder: 'label key=value', value: params.get('label') || '' });
  const body = h('div');
  label.onchange = () => { location.hash = '#/sessions' + (label.value ? '?label=' + encodeURIComponent(label.value) : ''); };
  main.replaceChildren(h('h1', { text: 'Sessions' }),
    h('p', { class: 'muted', text: 'Conversations over many runs: the one used last first. A paused session costs nothing until its next message.' }),
    h('div', { class: 'filters' }, label), body);
  let timer;
  async function load() {
    try {
      const q = label.value ? '?label=' + encodeURIComponent(label.value) : '';
      const d = await api('api/sessions' + q);
      const rows = d.sessions.map(s => h('tr', { 'data-session': s.id },
        h('td', {}, sessionLink(s.id)), h('td', {}, badge(s.state)), h('td', { text: s.profile }),
        h('td', { text: String(s.runCount) }),
        h('td', {}, s.runs.length ? runLink(s.live || s.runs[s.runs.length - 1]) : '-'),
        h('td', { text: s.head ? `${s.head.n} (${fmtBytes(s.head.treeBytes)})` : '-' }),
        h('td', {}, ago(s.updatedAt)), h('td', { class: 'wrap muted', text: labelText(s.labels) })));
      body.replaceChildren(...(d.errors || []).map(e => h('p', { class: 'error', text: e })),
        rows.length ? h('table', { id: 'sessions' },
          h('thead', {}, h('tr', {}, ...['session', 'state', 'profile', 'runs', 'last run', 'checkpoint', 'used', 'labels'].map(t => h('th', { text: t })))),
          h('tbody', {}, ...rows))
          : h('p', { id: 'sessions-empty', text: label.value ? 'No session has that label.' : 'No sessions yet: submit a job with a session id (baton submit --session ID) to start one.' }));
    } catch (e) { body.replaceChildren(h('p', { class: 'error', text: String(e.message || e) })); }
    timer = setTimeout(load, 5000);
  }
  load();
  return () => clearTimeout(timer);
}

function sessionPage(id) {
  setNav('sessions');
  const head = h('div', { class: 'run-head' });
  const errLine = h('p', { class: 'error' });
  const runs = h('div');
  const checkpoints = h('div');
  const actions = h('div', { class: 'card', id: 'session-actions' });
  const transcript = h('div', { id: 'session-transcript', class: 'card' });
  const hiddenNote = h('div', { class: 'hidden-note' });
  transcript.append(hiddenNote);
  main.replaceChildren(h('p', {}, h('a', { href: '#/sessions', text: '‹ sessions' })), head, errLine,
    h('div', { class: 'run-grid' },
      h('section', {}, h('h2', { text: 'Transcript' }), transcript,
        h('h2', { text: 'Runs' }), runs, h('h2', { text: 'Checkpoints' }), checkpoints),
      h('aside', {}, actions)));
  let timer, built = false;

  // The session's runs as one transcript: each run's chain in turn, from
  // its job's input to its terminal status, then the next run's once the
  // session lists it. A stream cut short resumes after the last sequence
  // shown, as a run's page does.
  const r = new Renderer(transcript, hiddenNote);
  const shownRuns = [];
  let es = null, streaming = '', lastSeq = 0, streamTimer = 0, closed = false, known = [], olderRuns = 0;
  function nextRun() {
    if (closed || streaming) return;
    // After the last run shown, by id: a long session's record keeps
    // only its latest runs.
    const i = shownRuns.length ? known.indexOf(shownRuns[shownRuns.length - 1]) + 1 : 0;
    if (i >= known.length || (shownRuns.length && i === 0)) return;
    const run = known[i];
    streaming = run; lastSeq = 0;
    r.push(h('div', { class: 'marker run-start', 'data-run': run }, `── run ${run} (${olderRuns + i + 1} of session ${id}) ──`));
    api('api/runs/' + encodeURIComponent(run)).then(info => {
      if (info.input) r.push(h('div', { class: 'entry user' }, h('div', { class: 'text', text: 'you › ' + inputText(info.input.replace(/\r?\n$/, '')) })));
      stream(run);
    }).catch(() => stream(run));
  }
  function stream(run) {
    if (closed) return;
    es = new EventSource('api/runs/' + encodeURIComponent(run) + '/events' + (lastSeq ? '?after=' + lastSeq : ''));
    es.onmessage = e => {
      const ev = JSON.parse(e.data);
      if (ev.seq <= lastSeq) return;
      lastSeq = ev.seq;
      const atBottom = transcript.scrollTop + transcript.clientHeight >= transcript.scrollHeight - 40;
      let st = null;
      if (ev.kind === 'status') { try { st = JSON.parse(ev.data); } catch (_) { /* shown raw */ } }
      if (st) r.marker(st); else r.add(ev);
      if (atBottom) transcript.scrollTop = transcript.scrollHeight;
    };
    es.addEventListener('end', () => { es.close(); shownRuns.push(run); streaming = ''; nextRun(); });
    es.addEventListener('failure', () => { es.close(); streamTimer = setTimeout(() => stream(run), 2000); });
    es.onerror = () => { if (es.readyState === EventSource.CLOSED && streaming === run) streamTimer = setTimeout(() => stream(run), 1000); };
  }

  // The send box: a live run gets the text as input, a paused or idle
  // session starts its next run with it. A message id makes a retried
  // click start no second run.
  function buildActions(info) {
    if (cfg.readOnly || info.readOnly) { actions.hidden = true; return; }
    const ta = h('textarea', { id: 'session-input', placeholder: 'Message: the live run gets it, or it starts the next run' });
    // Claude's stream-json input wants each message wrapped; the choice
    // is remembered for the next page.
    const wrap = h('input', { type: 'checkbox', id: 'session-stream-json', checked: localStorage.getItem('baton.streamJson') === '1',
      onchange: e => localStorage.setItem('baton.streamJson', e.target.checked ? '1' : '0') });
    const btn = h('button', { id: 'session-send', text: 'Send' });
    const note = h('div', { class: 'wrap note', id: 'session-note' });
    let msgId = '';
    btn.onclick = async () => {
      if (!ta.value) return;
      btn.disabled = true;
      msgId = msgId || crypto.randomUUID();
      try {
        const rep = await api('api/sessions/' + encodeURIComponent(id) + '/send' + (wrap.checked ? '?streamJson=1' : ''),
          { method: 'POST', body: ta.value, headers: { 'X-Baton-Msg-Id': msgId } });
        ta.value = ''; msgId = '';
        note.replaceChildren(rep.started ? 'started run ' : 'sent to run ', runLink(rep.runId));
        load();
      } catch (e) { note.replaceChildren(h('span', { class: 'error', text: 'send: ' + (e.message || e) })); }
      btn.disabled = false;
    };
    const del = h('button', { class: 'danger', id: 'session-delete', text: 'Delete session' });
    del.onclick = async () => {
      if (!confirm('Delete session ' + id + ' and its checkpoints?')) return;
      try {
        await api('api/sessions/' + encodeURIComponent(id), { method: 'DELETE' });
        location.hash = '#/sessions';
      } catch (e) { note.replaceChildren(h('span', { class: 'error', text: 'delete: ' + (e.message || e) })); }
    };
    actions.replaceChildren(h('h2', { text: 'Send' }), ta,
      h('div', {}, h('label', {}, wrap, ' as a stream-json user message'), ' ', btn), note, h('hr'), del);
  }

  function forkButton(cp) {
    if (cfg.readOnly) return null;
    const note = h('span', { class: 'note' });
    const btn = h('button', { class: 'fork', text: 'Fork' });
    btn.onclick = async () => {
      const as = prompt(`New session id, forked from checkpoint ${cp.n} of ${id}:`, `${id}-${cp.n}`);
      if (!as) return;
      try {
        const v = await api('api/sessions/' + encodeURIComponent(id) + '/fork', { method: 'POST', body: JSON.stringify({ as, checkpoint: cp.n }) });
        note.replaceChildren(' forked as ', sessionLink(v.id));
      } catch (e) { note.replaceChildren(h('span', { class: 'error', text: ' fork: ' + (e.message || e) })); }
    };
    return h('span', {}, btn, note);
  }

  async function load() {
    clearTimeout(timer);
    try {
      const info = await api('api/sessions/' + encodeURIComponent(id));
      const s = info.session;
      errLine.textContent = '';
      head.replaceChildren(h('h1', { class: 'mono', text: s.id }), badge(s.state),
        h('dl', {}, ...[['profile', s.profile], ['runs', String(s.runCount)], ['live run', s.live ? runLink(s.live) : '-'],
          ['forked from', s.forkedFrom ? h('span', {}, sessionLink(s.forkedFrom.session), ` checkpoint ${s.forkedFrom.checkpoint}`) : '-'],
          ['labels', labelText(s.labels) || '-'], ['created', fmtTime(s.createdAt)], ['used', ago(s.updatedAt)]]
          .flatMap(([k, v]) => [h('dt', { text: k }), v instanceof Node ? h('dd', { 'data-field': k }, v) : h('dd', { 'data-field': k, text: v })])));
      if (s.checkpointError) errLine.textContent = 'last checkpoint failed: ' + s.checkpointError;
      if (s.lostRun) errLine.textContent += (errLine.textContent ? '; ' : '') + `run ${s.lostRun} was lost: the session continues from the checkpoint before it`;
      const older = s.runCount - s.runs.length;
      runs.replaceChildren(h('table', { id: 'session-runs' },
        h('thead', {}, h('tr', {}, ...['#', 'run', 'state', 'duration'].map(t => h('th', { text: t })))),
        h('tbody', {}, ...s.runs.map((r, i) => {
          const b = info.runs[r] || {};
          return h('tr', { 'data-run': r }, h('td', { text: String(older + i + 1) }), h('td', {}, runLink(r)),
            h('td', {}, b.state ? badge(b.state) : '-', b.reason ? h('span', { class: 'muted', text: ' ' + b.reason }) : null),
            h('td', {}, since(b.startedAt, b.finishedAt)));
        }))), older > 0 ? h('p', { class: 'muted', text: `${older} older runs are not listed.` }) : null);
      checkpoints.replaceChildren(s.checkpoints.length ? h('table', { id: 'checkpoints' },
        h('thead', {}, h('tr', {}, ...['n', 'after run', 'kind', 'files', 'tree', 'stored', 'created', ''].map(t => h('th', { text: t })))),
        h('tbody', {}, ...s.checkpoints.slice().reverse().map(cp => h('tr', { 'data-checkpoint': cp.n },
          h('td', { text: String(cp.n) + (s.head && s.head.n === cp.n ? ' (head)' : '') }), h('td', {}, runLink(cp.run)),
          h('td', { text: cp.setup ? 'after setup' : cp.base ? 'base' : 'delta' }), h('td', { text: String(cp.files) }),
          h('td', { text: fmtBytes(cp.treeBytes) }), h('td', { text: fmtBytes(cp.size) }), h('td', {}, ago(cp.created)),
          h('td', {}, forkButton(cp))))))
        : h('p', { class: 'muted', text: 'No checkpoint yet: the first is taken when the first run ends.' }));
      if (!built) { buildActions(info); built = true; }
      known = s.runs; olderRuns = older;
      nextRun();
    } catch (e) {
      errLine.textContent = String(e.message || e);
      if (e.status === 404) { runs.replaceChildren(); checkpoints.replaceChildren(); actions.hidden = true; return; }
    }
    timer = setTimeout(load, 3000);
  }
  load();
  return () => { closed = true; clearTimeout(timer); clearTimeout(streamTimer); if (es) es.close(); };
}

// ---------- routing ----------

function route() {
  teardown();
  const hash = location.hash.slice(1) || '/';
  const [path, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  if (path.startsWith('/runs/')) teardown = runPage(decodeURIComponent(path.slice(6)));
  else if (path.startsWith('/sessions/')) teardown = sessionPage(decodeURIComponent(path.slice(10)));
  else if (path === '/sessions') teardown = sessionsPage(params);
  else if (path === '/workers') teardown = workersPage();
  else if (path === '/dlq') teardown = dlqPage();
  else teardown = listPage(params);
}

// Ends this browser's session on the server (every copy of its cookie),
// then shows the login page.
document.getElementById('logout').onclick = () =>
  fetch('logout', { method: 'POST', credentials: 'same-origin', headers: { 'X-Baton-Console': '1' } })
    .finally(() => { location.href = 'login'; });

api('api/config').then(c => {
  cfg = c;
  if (cfg.readOnly) document.getElementById('mode').textContent = 'read-only';
  document.getElementById('logout').hidden = !cfg.auth;
  window.addEventListener('hashchange', route);
  route();
}).catch(e => main.replaceChildren(h('p', { class: 'error', text: String(e.message || e) })));
