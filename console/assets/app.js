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
  if (!r.ok) throw Object.assign(new Error(body.error || r.statusText), { status: r.status, rejected: !!body.rejected, body });
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
  const queue = queueCard();
  main.replaceChildren(
    h('h1', { text: 'Runs' }),
    h('form', { class: 'filters', onsubmit: e => { e.preventDefault(); apply(); } },
      stateSel, profileSel, nodeSel, label, search, h('button', { type: 'submit', text: 'Filter' }), cancelSel, cancelNote),
    counts, errLine, queue.el,
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
  // A run that starts left the queue: the card is read again with the list.
  live.addEventListener('changed', () => { load(); queue.reload(); });
  return () => { live.close(); queue.stop(); };
}

// ---------- queue ----------

// queueCard is the concurrency keys' queue (docs/protocol.md#the-queue,
// GET api/queue): each key's running jobs against its limit, its weight
// and how many wait, then its first waiting jobs in the order they will
// start, with why each waits. Read every 5 s, and when a run starts;
// hidden while no key has a job waiting or running, and while no worker
// answers the request (workers without concurrency keys do not).
function queueCard() {
  const summary = h('span', { class: 'muted' });
  const keys = h('tbody');
  const jobs = h('tbody');
  const more = h('div', { class: 'muted' });
  const errLine = h('p', { class: 'error' });
  const jobsTable = h('table', { id: 'queue-jobs' }, h('thead', {}, h('tr', {},
    ...['key', 'position', 'run', 'profile', 'priority', 'waiting for', 'why it waits'].map(t => h('th', { text: t })))), jobs);
  const el = h('div', { class: 'card queue', id: 'queue', hidden: true },
    h('h2', {}, 'Queue ', summary), errLine,
    h('table', { id: 'queue-keys' }, h('thead', {}, h('tr', {},
      ...['key', 'running', 'weight', 'waiting'].map(t => h('th', { text: t })))), keys),
    jobsTable, more);
  let timer = 0, stopped = false;
  function render(v) {
    const ks = v.keys || [];
    el.hidden = !ks.length;
    errLine.textContent = '';
    summary.textContent = `${v.workers} worker${v.workers === 1 ? '' : 's'}, ${v.freeSlots} free slot${v.freeSlots === 1 ? '' : 's'}`;
    keys.replaceChildren(...ks.map(k => h('tr', { 'data-key': k.key },
      h('td', { class: 'mono', text: k.key }),
      h('td', { text: k.limit > 0 ? `${k.running}/${k.limit}` : `${k.running} (no limit)` }),
      h('td', { text: String(k.weight) }), h('td', { text: String(k.waiting) }))));
    const rows = ks.flatMap(k => (k.jobs || []).map(j => h('tr', { 'data-run': j.runId, 'data-reason': j.reason },
      h('td', { class: 'mono', text: k.key }), h('td', { text: String(j.position) }),
      h('td', {}, runLink(j.runId)), h('td', { text: j.profile || '-' }), h('td', { text: String(j.priority) }),
      h('td', {}, since(j.since)), h('td', { class: 'wrap', text: waitReason(j.reason) }))));
    jobs.replaceChildren(...rows);
    jobsTable.hidden = !rows.length;
    more.replaceChildren(...ks.filter(k => k.waiting > (k.jobs || []).length).map(k =>
      h('div', { text: `${k.key}: ${k.waiting - (k.jobs || []).length} more waiting, not listed` })));
  }
  async function load() {
    clearTimeout(timer);
    try {
      const v = await api('api/queue');
      if (!stopped) render(v);
    } catch (e) {
      if (stopped) return;
      if (e.status === 503) el.hidden = true; // no worker answers the queue request
      else { el.hidden = false; errLine.textContent = 'queue: ' + String(e.message || e); }
    }
    if (!stopped) timer = setTimeout(load, 5000);
  }
  function reload() { clearTimeout(timer); timer = setTimeout(load, 150); }
  load();
  return { el, reload, stop() { stopped = true; clearTimeout(timer); } };
}

// waitReason says why a queued job waits, as protocol.WaitReason.String()
// does.
function waitReason(r) {
  return {
    key_limit: 'key at its limit', behind: 'behind its key\'s earlier jobs',
    profile_limit: 'profile at its limit on every free worker', no_free_worker: 'no free worker',
  }[r] || `waiting (${r})`;
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
  const approvals = approvalsCard(runId, () => !cfg.readOnly && !(state.info && state.info.readOnly) && !state.terminal);
  const follow = h('input', { type: 'checkbox', checked: true, id: 'follow' });
  main.replaceChildren(
    h('p', {}, h('a', { href: '#/', text: '‹ runs' })),
    head, errLine, workersLine,
    h('div', { class: 'run-grid' },
      h('section', {},
        h('div', { class: 'pager' }, h('label', {}, follow, ' follow'), h('span', { class: 'muted', id: 'count' })),
        transcript, inputBox),
      h('aside', {},
        approvals.el,
        actions,
        h('h2', { text: 'Timeline' }), h('div', { class: 'card' }, timeline),
        outputs, stderr)));
  transcript.append(hiddenNote);

  // The transcript is the run's AG-UI projection (aguiQueue); the chain's
  // own messages (queue) drive the header, the timeline, the stderr tail,
  // the outputs and the count of messages.
  const r = new Renderer(transcript, hiddenNote, true);
  let queue = [], aguiQueue = [];
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
    if (st.status === 'waiting' && st.reason === 'approval') approvals.reload();
    if (st.status === 'started' || st.status === 'attached' || st.status === 'running') state.waiting = false;
    if (terminal.has(st.status)) {
      state.terminal = st;
      approvals.reload(); // nothing waits on an answer any more
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
      // A prompt line of a run with a policy, or what baton wrote for
      // one: the approvals changed.
      if (ev.approval) approvals.reload();
      if (ev.kind !== 'status') continue;
      let st = null;
      try { st = JSON.parse(ev.data); } catch (_) { /* not a status: the transcript shows it */ }
      if (st) onStatus(st);
    }
    if (batch.length) {
      shown += batch.length;
      count.textContent = shown.toLocaleString() + ' messages';
    }
    const events = aguiQueue;
    aguiQueue = [];
    for (const [pos, ev] of events) r.add(ev, pos);
    if (follow.checked && atBottom) transcript.scrollTop = transcript.scrollHeight;
  }
  function schedule() { if (!frame) frame = requestAnimationFrame(flush); }

  // The chain arrives as server-sent events whose ids are stream
  // sequences: the browser's EventSource reconnects with Last-Event-ID,
  // and a reconnect made here (after a refused or failed stream, as while
  // NATS cannot be reached) asks for what comes after the last sequence
  // shown. A sequence seen twice is dropped.
  let es = null, retry = 0, streamErr = false, workersTimer = 0, noRecordSince = 0, stopAGUI = null;
  function connect() {
    const url = 'api/runs/' + encodeURIComponent(runId) + '/events' + (state.lastSeq ? '?after=' + state.lastSeq : '');
    es = new EventSource(url);
    es.onmessage = e => {
      const ev = JSON.parse(e.data);
      if (ev.seq <= state.lastSeq) return;
      state.lastSeq = ev.seq;
      queue.push(ev);
      schedule();
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
      approvals.reload();
      connect();
      if (!stopAGUI) stopAGUI = followAGUI(runId, (pos, ev) => { aguiQueue.push([pos, ev]); schedule(); }, () => {});
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
    approvals.stop();
    clearTimeout(retry);
    clearTimeout(workersTimer);
    if (es) es.close();
    if (stopAGUI) stopAGUI();
    if (frame) cancelAnimationFrame(frame);
  };
}

// ---------- approvals ----------

// approvalsCard is a run's approvals (docs/protocol.md#approvals): each
// permission prompt its policy saw, with the tool and what it acts on,
// the rule that matched, and who decided it; a pending one has Allow and
// Deny buttons (and a reason for the agent, for Deny) while canAnswer()
// says the page may answer. reload() reads them again (coalesced); the
// card shows only once the run has one.
function approvalsCard(runId, canAnswer) {
  const list = h('div', { class: 'approval-list' });
  const el = h('div', { class: 'card', id: 'approvals', hidden: true }, h('h2', { text: 'Approvals' }), list);
  const notes = new Map(); // approval id -> the last answer's note, kept across reloads
  const drafts = new Map(); // approval id -> the reason typed for Deny
  const conflicts = new Set(); // approval ids whose answer here was refused: decided before
  const nodes = new Map(); // approval id -> {key, el}: an unchanged one keeps its element (and focus)
  let busy = false, again = false, stopped = false, timer = 0;
  const url = 'api/runs/' + encodeURIComponent(runId) + '/approvals';

  function decided(a) {
    if (a.state === 'pending') return a.heldAt ? 'pending: the agent was told it awaits approval (held ' + fmtTime(a.heldAt) + ')' : 'pending';
    let s = a.state + ' by ' + (a.decidedBy || '?');
    if (a.decidedAt) s += ' at ' + fmtTime(a.decidedAt);
    if (a.state === 'denied' && a.message) s += ': ' + oneLine(a.message, 200);
    return s;
  }

  function render(items) {
    el.hidden = !items.length;
    const els = items.map(a => {
      const key = JSON.stringify(a) + '|' + canAnswer() + '|' + (notes.get(a.id) || '');
      const had = nodes.get(a.id);
      if (had && had.key === key) return had.el;
      const made = build(a);
      nodes.set(a.id, { key, el: made });
      return made;
    });
    const now = [...list.children];
    if (now.length !== els.length || now.some((e, i) => e !== els[i])) list.replaceChildren(...els);
  }

  function build(a) {
    const open = a.state === 'pending' && canAnswer();
    const note = h('div', { class: 'approval-note', text: notes.get(a.id) || '' });
    const why = h('input', { type: 'text', class: 'approval-message', placeholder: 'reason for the agent (Deny)', maxlength: '2000',
      oninput: () => drafts.set(a.id, why.value) });
    why.value = drafts.get(a.id) || '';
    const allow = h('button', { class: 'allow', type: 'button', text: 'Allow' });
    const deny = h('button', { class: 'danger deny', type: 'button', text: 'Deny' });
    const answer = async (ok, btn) => {
      btn.disabled = true;
      try {
        const rec = await api(url + '/' + encodeURIComponent(a.id), { method: 'POST',
          headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ allow: ok, message: ok ? '' : why.value }) });
        if (!conflicts.has(a.id)) notes.delete(a.id); // a second answer's refusal stays said
        drafts.delete(a.id);
        replace(rec);
      } catch (e) {
        if (e.status === 409 && e.body && e.body.approval) {
          const rec = e.body.approval;
          conflicts.add(a.id);
          notes.set(a.id, 'already decided: ' + decided(rec) + (rec.rule && rec.decidedBy === 'policy' ? ' (' + rec.rule + ')' : ''));
          replace(rec);
        } else {
          notes.set(a.id, String(e.message || e));
          note.textContent = notes.get(a.id);
          nodes.get(a.id).key += '|' + notes.get(a.id); // this element shows it already
          btn.disabled = false;
        }
      }
    };
    allow.onclick = () => answer(true, allow);
    deny.onclick = () => answer(false, deny);
    return h('div', { class: 'approval st-' + a.state, 'data-approval': a.id, 'data-state': a.state },
      h('div', { class: 'mono what', text: oneLine(a.tool, 64) + (a.target ? ': ' + oneLine(a.target, 200) : '') }),
      h('div', { class: 'muted rule', text: [a.rule || a.verdict, 'asked ' + fmtTime(a.askedAt)].filter(Boolean).join(' · ') }),
      h('div', { class: 'decided', text: decided(a) }),
      open ? h('div', { class: 'approval-actions' }, allow, ' ', deny, why) : null,
      note);
  }

  let items = [];
  function replace(rec) {
    const i = items.findIndex(x => x.id === rec.id);
    if (i >= 0) items[i] = rec; else items.push(rec);
    render(items);
  }

  async function load() {
    if (stopped) return;
    if (busy) { again = true; return; }
    busy = true;
    try {
      const rep = await api(url);
      if (!stopped) { items = rep.approvals || []; render(items); }
    } catch (_) { /* no worker answers, or none serves approvals yet: the card waits for the next change */ }
    busy = false;
    if (again) { again = false; load(); }
  }
  // Several changes at once (a prompt and its decision) are one read.
  function reload() { clearTimeout(timer); timer = setTimeout(load, 150); }
  return { el, reload, stop: () => { stopped = true; clearTimeout(timer); } };
}

// ---------- transcript ----------

// The transcript renders a run's AG-UI projection (GET
// api/runs/<runId>/agui), the same events whatever the agent's dialect:
// Claude Code's stream-json, Codex's exec --json or app-server, baton's
// fake agent, any NDJSON agent.

// parsePos reads an event's position, "<seq>:<index>", as [seq, index].
function parsePos(id) {
  const m = /^(\d+):(\d+)$/.exec(id || '');
  return m ? [+m[1], +m[2]] : null;
}
function posAfter(p, q) { return p[0] > q[0] || (p[0] === q[0] && p[1] > q[1]); }

// runStatus is the baton status an AG-UI event carries: a run's start,
// a turn's or the run's end, a hand-off, an attach, a wait, a resume.
function runStatus(ev) {
  switch (ev.type) {
    case 'RUN_STARTED': return ev.rawEvent || null;
    case 'RUN_FINISHED': return (ev.result && ev.result.status) || null;
    case 'RUN_ERROR': return (ev.rawEvent && ev.rawEvent.status) || null;
    case 'CUSTOM': return /^baton\.(handoff|attached|waiting|running)$/.test(ev.name) ? ev.value : null;
  }
  return null;
}

// followAGUI reads run runId's AG-UI events, from its start to the end
// of its last turn, giving each to onEvent(pos, event) once, in order,
// then calls onEnd. The browser's EventSource resumes a cut stream with
// Last-Event-ID; a stream refused or failed (NATS cannot be reached) is
// opened again after the last position shown. An event not after it is
// dropped. It returns a function that stops it.
function followAGUI(runId, onEvent, onEnd) {
  let es = null, last = null, timer = 0, done = false;
  function connect() {
    es = new EventSource('api/runs/' + encodeURIComponent(runId) + '/agui' + (last ? '?after=' + last.join(':') : ''));
    es.onmessage = e => {
      const pos = parsePos(e.lastEventId);
      if (done || !pos || (last && !posAfter(pos, last))) return;
      last = pos;
      const ev = JSON.parse(e.data);
      onEvent(pos, ev);
      // The stream ends after the run's terminal status; an EventSource
      // left open would ask for more.
      const st = runStatus(ev);
      if ((ev.type === 'RUN_FINISHED' || ev.type === 'RUN_ERROR') && st && terminal.has(st.status)) {
        done = true;
        es.close();
        onEnd();
      }
    };
    es.onerror = () => {
      if (!done && es.readyState === EventSource.CLOSED) timer = setTimeout(connect, 1000);
    };
  }
  connect();
  return () => { done = true; clearTimeout(timer); if (es) es.close(); };
}

// Renderer turns a run's AG-UI events into transcript entries: the
// user's messages and inputs as "you › ...", assistant text as it
// streams, reasoning folded as "thinking", tool calls with their input
// and, once it comes, their result; permission prompts as one line;
// each turn's result line (turns, cost, duration, tokens) or error; the
// run's statuses as markers. Lines no dialect translates are collapsible
// JSON, raw lines are text.
class Renderer {
  // markJobInput gives the job's input (the user message the run's
  // start carries) the id job-input.
  constructor(root, hiddenNote, markJobInput) {
    this.root = root;
    this.note = hiddenNote;
    this.hidden = 0;
    this.markJobInput = markJobInput;
    this.startSeq = 0;       // the sequence of the run's started status
    this.msgs = new Map();   // text or reasoning message id -> {el, text}
    this.tools = new Map();  // tool call id -> {el, name, args}
  }

  push(el) {
    this.root.append(el);
    // +1: the hidden note is the first child.
    while (this.root.childElementCount > MAX_ENTRIES + 1) {
      const old = this.note.nextElementSibling;
      for (const e of [old, ...old.querySelectorAll('[data-tool], [data-msg]')]) {
        if (e.dataset.tool) this.tools.delete(e.dataset.tool);
        if (e.dataset.msg) this.msgs.delete(e.dataset.msg);
      }
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

  you(text) { this.push(h('div', { class: 'entry user' }, h('div', { class: 'text', text: 'you › ' + text }))); }

  prompt(text) { this.push(h('div', { class: 'entry prompt', text })); }

  // egress is a connection the sandbox's proxy decided, in one line:
  // allowed with its bytes each way, or refused and why.
  egress(v) {
    if (v.note) { this.push(h('div', { class: 'entry egress mono', text: 'egress: ' + v.note })); return; }
    const where = `${v.method || ''} ${v.host}:${v.port}`;
    const text = v.allowed
      ? `egress ✓ ${where} ↑ ${fmtBytes(v.bytesOut || 0)} ↓ ${fmtBytes(v.bytesIn || 0)} in ${fmtDur(v.durationMs || 0)}` +
        (v.secret ? `, secret ${v.secret}` : '') + (v.reason ? ` (${v.reason})` : '')
      : `egress ✗ ${where} refused: ${v.reason || 'no reason given'}`;
    this.push(h('div', { class: 'entry egress mono' + (v.allowed ? '' : ' refused'), text }));
  }

  // hostTool is a host tool call or its answer (docs/tools.md), in one
  // line: the tool, the call's number, its arguments, or its result or
  // error. The agent wrote the arguments and the service the answer: as
  // every run string they go in as text, on one line, cut short.
  hostTool(v) {
    const head = `tool › ${oneLine(v.name, 64)} #${v.call} `;
    let text;
    if (v.phase === 'call') text = head + oneLine(JSON.stringify(v.args === undefined ? {} : v.args));
    else if (v.error) text = head + '✗ ' + oneLine(v.error);
    else text = head + '→ ' + oneLine(v.result);
    if (v.truncated) text += ' (cut on the chain)';
    this.push(h('div', { class: 'entry host-tool mono' + (v.phase !== 'call' && v.error ? ' err' : ''), 'data-call': String(v.call), text }));
  }

  json(label, v) {
    this.push(h('details', { class: 'entry json' }, h('summary', { text: label }), h('pre', { text: JSON.stringify(v, null, 2) })));
  }

  // add renders event ev, at position pos.
  add(ev, pos) {
    switch (ev.type) {
      case 'RUN_STARTED':
        if (ev.rawEvent) {
          this.startSeq = this.startSeq || pos[0];
          this.marker(ev.rawEvent);
        }
        return;
      case 'RUN_FINISHED': case 'RUN_ERROR': this.end(ev); return;
      case 'TEXT_MESSAGE_START': this.message(ev.messageId, ev.role, pos); return;
      case 'TEXT_MESSAGE_CONTENT': this.message(ev.messageId).text.appendData(ev.delta || ''); return;
      case 'REASONING_START': case 'REASONING_MESSAGE_START': this.reasoning(ev.messageId); return;
      case 'REASONING_MESSAGE_CONTENT': this.reasoning(ev.messageId).text.appendData(ev.delta || ''); return;
      case 'TEXT_MESSAGE_END': case 'REASONING_MESSAGE_END': case 'REASONING_END': return;
      case 'TOOL_CALL_START': this.tool(ev.toolCallId, ev.toolCallName, ev.parentMessageId); return;
      case 'TOOL_CALL_ARGS': this.tool(ev.toolCallId).args.appendData(ev.delta || ''); return;
      case 'TOOL_CALL_END': {
        const t = this.tool(ev.toolCallId);
        t.summary.textContent = summarize(t.args.data);
        return;
      }
      case 'TOOL_CALL_RESULT': this.toolResult(ev); return;
      case 'RAW': this.raw(ev); return;
      case 'CUSTOM': this.custom(ev); return;
    }
    this.json(ev.type || 'event', ev);
  }

  // message is text message id's entry, made when it starts (or, its
  // start having left the page, when more of it comes).
  message(id, role, pos) {
    let m = this.msgs.get(id);
    if (!m) {
      const text = document.createTextNode('');
      const el = role === 'user'
        ? h('div', { class: 'entry user', 'data-msg': id, id: this.markJobInput && pos && pos[0] === this.startSeq ? 'job-input' : null },
          h('div', { class: 'text' }, 'you › ', text))
        : h('div', { class: 'entry assistant', 'data-msg': id }, h('div', { class: 'text' }, text));
      m = { el, text };
      this.msgs.set(id, m);
      this.push(el);
    }
    return m;
  }

  reasoning(id) {
    let m = this.msgs.get(id);
    if (!m) {
      const text = document.createTextNode('');
      const el = h('details', { class: 'entry json thinking', 'data-msg': id }, h('summary', { text: 'thinking' }), h('pre', {}, text));
      m = { el, text };
      this.msgs.set(id, m);
      this.push(el);
    }
    return m;
  }

  // tool is tool call id's block: in the assistant message it follows
  // when that is on the page, else an entry of its own.
  tool(id, name, parent) {
    let t = this.tools.get(id);
    if (!t) {
      const args = document.createTextNode('');
      const summary = h('span', { class: 'muted mono' });
      const p = parent && this.msgs.get(parent);
      const el = h('details', { class: p ? 'tool' : 'entry tool', 'data-tool': id },
        h('summary', {}, h('span', { class: 'name', text: name || 'tool' }), ' ', summary), h('pre', {}, args));
      t = { el, args, summary };
      this.tools.set(id, t);
      if (p && p.el.classList.contains('assistant')) p.el.append(el);
      else this.push(el);
    }
    return t;
  }

  toolResult(ev) {
    const text = ev.content || '';
    const bad = !!(ev.metadata && ev.metadata.isError);
    const pre = h('pre', { class: 'result', text: text.length > 20000 ? text.slice(0, 20000) + '\n… (cut)' : text });
    const t = this.tools.get(ev.toolCallId);
    if (t) {
      t.el.append(pre);
      if (bad) t.el.classList.add('err');
    } else {
      this.push(h('details', { class: 'entry tool' + (bad ? ' err' : '') }, h('summary', { text: 'tool result' }), pre));
    }
  }

  // raw shows a line no dialect translates: the agent's answer to a
  // control request and a settled request as one line, any other as
  // collapsible JSON.
  raw(ev) {
    const m = ev.event;
    if (m && m.type === 'control_response' && m.response) {
      const r = m.response;
      this.prompt(r.subtype === 'error' || r.error ? `↳ the agent refused request ${r.request_id}: ${r.error || ''}` : `↳ the agent took request ${r.request_id}`);
      return;
    }
    if (m && m.method === 'serverRequest/resolved' && m.params && m.params.requestId !== undefined) {
      this.prompt(`request ${m.params.requestId} settled`);
      return;
    }
    const label = m && typeof m === 'object' ? [m.type || m.method, m.subtype || (m.event && m.event.type)].filter(Boolean).join(' · ') : '';
    this.json(label || ev.source || 'JSON', m);
  }

  custom(ev) {
    const v = ev.value || {};
    switch (ev.name) {
      case 'baton.raw': this.push(h('div', { class: 'entry raw mono', text: v.line })); return;
      case 'baton.approval': {
        const p = (v.request && v.request.params) || {};
        const what = v.input !== undefined ? summarize(JSON.stringify(v.input)) : String(p.command || p.reason || '').slice(0, 200);
        this.prompt(`? ${v.toolName || 'tool'} asks: ${what}  [request ${v.requestId}]`);
        return;
      }
      case 'baton.approval_cancelled': this.prompt(`? request ${v.requestId} withdrawn: the agent no longer waits for its answer`); return;
      case 'baton.approval_answer': {
        const ok = v.decision === 'allow' || String(v.decision).startsWith('accept');
        const why = ok ? '' : v.message || (v.decision !== 'deny' ? v.decision : '');
        this.you((ok ? 'allow ' : 'deny ') + v.requestId + (why ? ': ' + why : ''));
        return;
      }
      case 'baton.interrupt': this.you('interrupt'); return;
      case 'baton.eof': this.you('end of input (the agent\'s stdin is closed)'); return;
      case 'baton.input': this.you(JSON.stringify(v.input)); return;
      case 'baton.handoff': case 'baton.attached': case 'baton.waiting': case 'baton.running': this.marker(v); return;
      case 'baton.egress': this.egress(v); return;
      case 'baton.tool': this.hostTool(v); return;
      case 'claude.init':
        this.push(h('div', { class: 'marker', text: ['session', [v.session_id, v.model, v.cwd].filter(Boolean).join(' · ')].join(' ').trim() }));
        return;
      case 'codex.thread_started': {
        const id = v.thread_id || (v.params && v.params.thread && v.params.thread.id);
        this.push(h('div', { class: 'marker', text: 'thread' + (id ? ' ' + id : '') }));
        return;
      }
    }
    this.json(ev.name || 'CUSTOM', v);
  }

  // end shows a turn's end: its result line when the agent reported the
  // turn, its usage or an error, then the run's end status.
  end(ev) {
    const failed = ev.type === 'RUN_ERROR';
    const res = (failed ? ev.rawEvent : ev.result) || {};
    const t = res.turn || {};
    const usage = Array.isArray(ev.usage) ? ev.usage : [];
    if (res.turn || failed || usage.length) {
      const bad = failed || t.is_error || (t.subtype && t.subtype !== 'success');
      const bits = [t.subtype, t.num_turns !== undefined && `${t.num_turns} turns`,
        typeof t.total_cost_usd === 'number' && `$${t.total_cost_usd.toFixed(4)}`,
        t.duration_ms !== undefined && `${(t.duration_ms / 1000).toFixed(1)} s`,
        ...usage.map(fmtUsage), ev.outcome && ev.outcome.type === 'cancelled' && 'cancelled'].filter(Boolean);
      const why = failed ? (ev.message && ev.code && !ev.message.includes(ev.code) ? `${ev.code}: ${ev.message}` : ev.message || ev.code) : t.result;
      this.push(h('div', { class: 'entry result-line' + (bad ? ' err' : ''), 'data-result': '1' },
        h('strong', { text: failed ? 'error ' : 'result ' }), h('span', { text: bits.join(' · ') }),
        typeof why === 'string' && why ? h('div', { class: 'text', text: why }) : null));
    }
    if (res.status && terminal.has(res.status.status)) this.marker(res.status);
  }
}

// fmtUsage is one model's token usage: "claude-x: 1,200 in (800 cached), 300 out (120 reasoning) tokens".
function fmtUsage(u) {
  const n = x => (x || 0).toLocaleString();
  return (u.model ? u.model + ': ' : '') + `${n(u.inputTokens)} in` + (u.cachedInputTokens ? ` (${n(u.cachedInputTokens)} cached)` : '') +
    `, ${n(u.outputTokens)} out` + (u.reasoningTokens ? ` (${n(u.reasoningTokens)} reasoning)` : '') + ' tokens';
}

// oneLine is s on one line of at most n characters: line breaks, other
// control characters and bidirectional controls (which would reorder
// what the line shows) escaped, as `baton watch` shows them.
function oneLine(s, n = 200) {
  const t = String(s === undefined || s === null ? '' : s).replace(
    /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, c => {
      const esc = { '\n': '\\n', '\t': '\\t', '\r': '\\r' }[c];
      if (esc) return esc;
      const code = c.charCodeAt(0);
      return code < 0x80 ? '\\x' + code.toString(16).padStart(2, '0') : '\\u' + code.toString(16).padStart(4, '0');
    });
  const chars = Array.from(t);
  return chars.length > n ? chars.slice(0, n).join('') + '…' : t;
}

// summarize is a tool call's input in a few words: its command, file,
// pattern or address.
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

  // The session's runs as one transcript: each run's AG-UI projection in
  // turn, from its job's input to its terminal status, then the next
  // run's once the session lists it. A stream cut short resumes after the
  // last position shown, as a run's page does.
  const r = new Renderer(transcript, hiddenNote, false);
  const shownRuns = [];
  let stop = null, streaming = '', closed = false, known = [], olderRuns = 0;
  function nextRun() {
    if (closed || streaming) return;
    // After the last run shown, by id: a long session's record keeps
    // only its latest runs.
    const i = shownRuns.length ? known.indexOf(shownRuns[shownRuns.length - 1]) + 1 : 0;
    if (i >= known.length || (shownRuns.length && i === 0)) return;
    const run = known[i];
    streaming = run;
    r.push(h('div', { class: 'marker run-start', 'data-run': run }, `── run ${run} (${olderRuns + i + 1} of session ${id}) ──`));
    stop = followAGUI(run, (pos, ev) => {
      const atBottom = transcript.scrollTop + transcript.clientHeight >= transcript.scrollHeight - 40;
      r.add(ev, pos);
      if (atBottom) transcript.scrollTop = transcript.scrollHeight;
    }, () => { shownRuns.push(run); streaming = ''; stop = null; nextRun(); });
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
  return () => { closed = true; clearTimeout(timer); if (stop) stop(); };
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
