// The kubeferry dashboard: every job at a glance, live from the service's event stream, and
// each job's status, story and log. Everything it shows comes from jobs, so every string is
// set as text (never as HTML); the page's Content-Security-Policy allows no other script.
'use strict';

const TOKEN_KEY = 'kubeferry.token';
const STATES = ['QUEUED', 'STARTED', 'CANCELLING', 'SUCCEEDED', 'FAILED', 'CANCELLED'];
const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
const KINDS = { job: 'Job', jobset: 'JobSet', sparkapp: 'Spark' };
const PAGE_SIZE = 100;
const FLASH_MS = 1500;

/** What the page holds: the token's identity, the jobs seen, what is open. */
const page = {
  who: null,
  jobs: new Map(), // id -> {info, createdAt, jobId, changedAt}
  streams: [], // AbortControllers of the open streams
  renderQueued: false,
  firstRowsAt: null,
};

// ---- DOM: text only ---------------------------------------------------------------------

/** An element with attributes (`class`, `data-*`, event handlers as functions) and children
 * (strings become text nodes). */
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') node.addEventListener(name.replace(/^on/, ''), value);
    else if (name === 'text') node.textContent = String(value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Replaces the children of `node` (nothing for null, arrays flattened). */
function fill(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((child) => child !== null && child !== undefined && child !== false));
}

function show(node) {
  const main = document.getElementById('main');
  fill(main, node);
}

function banner(message) {
  const node = document.getElementById('banner');
  node.textContent = message || '';
  node.hidden = !message;
}

// ---- The API, with the tab's token ------------------------------------------------------

class SignedOut extends Error {}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function headers() {
  const value = token();
  return value ? { Authorization: `Bearer ${value}` } : {};
}

/** Calls the API; a refused token brings the sign-in back. */
async function api(path, options = {}) {
  const init = { method: options.method || 'GET', headers: headers(), signal: options.signal };
  if (options.body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(options.body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) {
    signIn('The token was refused (wrong or expired): sign in again.');
    throw new SignedOut();
  }
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = (body && (body.message || (body.error && body.error.message))) || text;
    throw new Error(`${response.status}: ${message}`);
  }
  return body;
}

/** Reads a stream of the API, calling `onChunk` with each piece of text. */
async function read(path, signal, onChunk) {
  const response = await fetch(path, { headers: headers(), signal });
  if (response.status === 401) {
    signIn('The token was refused (wrong or expired): sign in again.');
    throw new SignedOut();
  }
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onChunk(value);
  }
}

/** Follows Server-Sent Events of the API, calling `onEvent(name, data)` for each. */
async function events(path, signal, onEvent) {
  let buffer = '';
  await read(path, signal, (chunk) => {
    buffer += chunk.replace(/\r\n/g, '\n');
    // One pass over what came (a first burst holds thousands of events), cut once at the end.
    let start = 0;
    let end;
    while ((end = buffer.indexOf('\n\n', start)) >= 0) {
      const block = buffer.slice(start, end);
      start = end + 2;
      let name = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) name = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length) onEvent(name, data.join('\n'));
    }
    buffer = buffer.slice(start);
  });
}

/** Opens a stream that ends when the view changes; a failure other than the end shows. */
function follow(run) {
  const controller = new AbortController();
  page.streams.push(controller);
  run(controller.signal).catch((error) => {
    if (controller.signal.aborted || error instanceof SignedOut) return;
    banner(`Live updates stopped: ${error.message}`);
  });
  return controller;
}

function closeStreams() {
  for (const controller of page.streams) controller.abort();
  page.streams = [];
}

// ---- Ids, times and durations -----------------------------------------------------------

/** `cluster/kind/namespace/name` in parts. */
function parts(id) {
  const [cluster, kind, namespace, ...name] = id.split('/');
  return { cluster, kind, namespace, name: name.join('/') };
}

function seconds(from, to) {
  if (!from) return null;
  const end = to ? Date.parse(to) : Date.now();
  return Math.max(0, Math.round((end - Date.parse(from)) / 1000));
}

function duration(total) {
  if (total === null || total === undefined) return '';
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h) return `${h}h${m}m`;
  if (m) return `${m}m${s}s`;
  return `${s}s`;
}

function when(at) {
  if (!at) return '';
  const date = new Date(at);
  const today = new Date().toDateString() === date.toDateString();
  return today ? date.toLocaleTimeString() : date.toLocaleString();
}

function stateBadge(state) {
  return el('span', { class: `state state-${state.toLowerCase()}` }, state);
}

// ---- Where the page is: the URL holds it -------------------------------------------------

function params() {
  return new URLSearchParams(location.search);
}

function go(query, push = true) {
  const url = `/ui${query.toString() ? `?${query}` : ''}`;
  if (push) history.pushState(null, '', url);
  else history.replaceState(null, '', url);
  route();
}

// ---- Sign-in ----------------------------------------------------------------------------

function signIn(message) {
  closeStreams();
  sessionStorage.removeItem(TOKEN_KEY);
  page.who = null;
  page.jobs.clear();
  document.getElementById('who').textContent = '';
  document.getElementById('sign-out').hidden = true;
  banner('');
  const input = el('input', {
    id: 'token', type: 'password', autocomplete: 'off', required: true,
    'aria-label': 'Bearer token', placeholder: 'Bearer token',
  });
  const form = el('form', {
    id: 'sign-in', class: 'sign-in',
    onsubmit: (event) => {
      event.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      route();
    },
  },
  el('h1', {}, 'Sign in'),
  el('p', {}, 'The token is kept for this tab only, and sent with every call.'),
  message ? el('p', { id: 'sign-in-error', class: 'error', role: 'alert' }, message) : null,
  input,
  el('button', { type: 'submit' }, 'Sign in'));
  show(form);
  input.focus();
}

// ---- The jobs -----------------------------------------------------------------------------

function filters() {
  const p = params();
  return {
    namespace: p.get('namespace') || '',
    kind: p.get('kind') || '',
    state: p.get('state') || '',
    selector: p.get('selector') || '',
    text: p.get('q') || '',
    sort: p.get('sort') || 'created',
    dir: p.get('dir') || 'desc',
    page: Math.max(0, Number(p.get('page') || 0) || 0),
  };
}

function setFilter(name, value) {
  const p = params();
  if (value) p.set(name, value);
  else p.delete(name);
  if (name !== 'page') p.delete('page');
  go(p, false);
}

function remember(info, extra = {}) {
  const known = page.jobs.get(info.id);
  // The list and the stream cross on the way: an end stands.
  if (known && TERMINAL.has(known.info.state) && !TERMINAL.has(info.state)) return;
  const changed = known && known.info.state !== info.state;
  const jobId = info.jobId || extra.jobId || (known && known.jobId) || '';
  page.jobs.set(info.id, {
    info,
    ...parts(info.id),
    createdAt: extra.createdAt || (known && known.createdAt) || info.startedAt || '',
    jobId,
    search: [info.id, jobId, info.reason, info.message].join(' ').toLowerCase(),
    changedAt: changed ? Date.now() : known ? known.changedAt : 0,
  });
  if (changed) setTimeout(queueRender, FLASH_MS + 50);
}

function queueRender() {
  if (page.renderQueued) return;
  page.renderQueued = true;
  requestAnimationFrame(() => {
    page.renderQueued = false;
    if (document.getElementById('jobs')) renderJobs();
  });
}

async function jobsView() {
  const f = filters();
  const namespaces = page.who.namespaces;
  const select = (id, label, value, options, onchange) => el('label', {},
    label,
    el('select', { id, onchange }, options.map(([v, text]) =>
      el('option', { value: v, selected: v === value }, text))));
  const text = (id, label, value, name, placeholder) => el('label', {},
    label,
    el('input', {
      id, type: 'search', value, placeholder,
      onchange: (event) => setFilter(name, event.target.value.trim()),
    }));
  show(el('section', { id: 'jobs-view' },
    el('form', { class: 'filters', onsubmit: (event) => event.preventDefault() },
      select('filter-namespace', 'Namespace', f.namespace,
        [['', 'all'], ...namespaces.map((n) => [n, n])],
        (event) => setFilter('namespace', event.target.value)),
      select('filter-kind', 'Kind', f.kind, [['', 'all'], ...Object.entries(KINDS)],
        (event) => setFilter('kind', event.target.value)),
      select('filter-state', 'State', f.state, [['', 'all'], ...STATES.map((s) => [s, s])],
        (event) => setFilter('state', event.target.value)),
      text('filter-selector', 'Labels', f.selector, 'selector', 'team=data'),
      text('filter-text', 'Search', f.text, 'q', 'id, job id, reason, message')),
    el('div', { id: 'counts', class: 'counts' }),
    el('div', { class: 'charts' },
      el('figure', {}, el('figcaption', {}, 'Jobs by state, last hour'),
        el('div', { id: 'history', class: 'history' })),
      el('figure', {}, el('figcaption', {}, 'Why jobs failed'),
        el('div', { id: 'reasons', class: 'reasons' }))),
    el('div', { class: 'table-wrap' },
      el('table', { id: 'jobs' },
        el('thead', {}, el('tr', {}, [
          ['namespace', 'Namespace'], ['id', 'Execution id'], ['jobId', 'Job id'],
          ['kind', 'Kind'], ['state', 'State'], ['reason', 'Reason'], ['exit', 'Exit'],
          ['created', 'Created'], ['duration', 'Duration'],
        ].map(([key, label]) => el('th', { scope: 'col' },
          el('button', {
            type: 'button', class: 'sort', 'data-sort': key,
            'aria-sort': f.sort === key ? (f.dir === 'asc' ? 'ascending' : 'descending') : null,
            onclick: () => {
              const p = params();
              p.set('sort', key);
              p.set('dir', f.sort === key && f.dir === 'desc' ? 'asc' : 'desc');
              go(p, false);
            },
          }, label, f.sort === key ? (f.dir === 'asc' ? ' ▲' : ' ▼') : ''))))),
        el('tbody', {}))),
    el('nav', { id: 'pager', class: 'pager' })));
  renderJobs();
  const scope = f.namespace ? `namespace=${encodeURIComponent(f.namespace)}` : '';
  const selector = f.selector ? `selector=${encodeURIComponent(f.selector)}` : '';
  const query = [scope, selector].filter(Boolean).join('&');
  loadHistory(f.namespace);
  // The event stream first (every job the service's caches hold, then each change), then every
  // page of the list once the stream has sent what it holds: the list adds the jobs known only
  // from their outcome records, and each job's creation time and job id. Each page of the list
  // costs the service a list of every job, so it comes second.
  let listing = false;
  const list = () => follow(async (signal) => {
    let next = '';
    do {
      const answer = await api(`/v1/jobs?limit=1000${query ? `&${query}` : ''}${next ? `&continue=${encodeURIComponent(next)}` : ''}`, { signal });
      for (const item of answer.items) remember(item.job, item);
      next = answer.continue || '';
      queueRender();
    } while (next);
    document.body.dataset.listed = String(Math.round(performance.now()));
  });
  follow((signal) => events(`/v1/events${query ? `?${query}` : ''}`, signal, (name, data) => {
    if (name === 'listed' && !listing) {
      listing = true;
      list();
    }
    if (name !== 'status') return;
    remember(JSON.parse(data));
    queueRender();
  }));
}

function visibleJobs(f) {
  const text = f.text.toLowerCase();
  const key = {
    namespace: (j) => j.namespace,
    id: (j) => j.info.id,
    jobId: (j) => j.jobId,
    kind: (j) => j.kind,
    state: (j) => STATES.indexOf(j.info.state),
    reason: (j) => j.info.reason || '',
    exit: (j) => (j.info.exitCode === undefined ? -1 : j.info.exitCode),
    created: (j) => j.createdAt,
    duration: (j) => seconds(j.info.startedAt, j.info.finishedAt) || 0,
  }[f.sort] || ((j) => j.createdAt);
  // Each row's key once, then a sort of the keys: thousands of jobs redrawn at every event.
  const rows = [];
  for (const job of page.jobs.values()) {
    if (f.namespace && job.namespace !== f.namespace) continue;
    if (f.kind && job.kind !== f.kind) continue;
    if (f.state && job.info.state !== f.state) continue;
    if (text && !job.search.includes(text)) continue;
    rows.push([key(job), job]);
  }
  const sign = f.dir === 'asc' ? 1 : -1;
  rows.sort(([x, a], [y, b]) => {
    if (x < y) return -sign;
    if (x > y) return sign;
    return a.info.id < b.info.id ? -1 : 1;
  });
  return rows.map(([, job]) => job);
}

function renderJobs() {
  const f = filters();
  const table = document.getElementById('jobs');
  if (!table) return;
  // Counts by state, of the jobs the other filters leave.
  const counts = Object.fromEntries(STATES.map((s) => [s, 0]));
  const text = f.text.toLowerCase();
  for (const job of page.jobs.values()) {
    if (f.namespace && job.namespace !== f.namespace) continue;
    if (f.kind && job.kind !== f.kind) continue;
    if (text && !job.search.includes(text)) continue;
    counts[job.info.state] += 1;
  }
  fill(document.getElementById('counts'), ...STATES.map((state) =>
    el('button', {
      type: 'button', class: `count${f.state === state ? ' active' : ''}`, 'data-state': state,
      'aria-pressed': f.state === state ? 'true' : 'false',
      onclick: () => setFilter('state', f.state === state ? '' : state),
    }, stateBadge(state), el('span', { class: 'number' }, String(counts[state])))));
  renderReasons();
  const rows = visibleJobs(f);
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  const pageIndex = Math.min(f.page, pages - 1);
  const shown = rows.slice(pageIndex * PAGE_SIZE, (pageIndex + 1) * PAGE_SIZE);
  const longest = Math.max(1, ...shown.map((j) => seconds(j.info.startedAt, j.info.finishedAt) || 0));
  const now = Date.now();
  table.tBodies[0].replaceChildren(...shown.map((job) => {
    const info = job.info;
    const spent = seconds(info.startedAt, info.finishedAt);
    const link = `/ui?job=${encodeURIComponent(info.id)}`;
    return el('tr', {
      'data-id': info.id, 'data-state': info.state,
      class: now - job.changedAt < FLASH_MS ? 'changed' : null,
    },
    el('td', {}, job.namespace),
    el('td', { class: 'id' }, el('a', {
      href: link,
      onclick: (event) => {
        if (event.ctrlKey || event.metaKey || event.shiftKey) return;
        event.preventDefault();
        go(new URLSearchParams({ job: info.id }));
      },
    }, job.name)),
    el('td', { class: 'job-id' }, job.jobId),
    el('td', {}, KINDS[job.kind] || job.kind),
    el('td', {}, stateBadge(info.state)),
    el('td', { title: info.message || null }, info.reason || ''),
    el('td', { class: 'number' }, info.exitCode === undefined ? '' : String(info.exitCode)),
    el('td', { class: 'created' }, when(job.createdAt)),
    el('td', { class: 'duration' },
      el('span', { class: 'bar', 'data-width': String(Math.round((100 * (spent || 0)) / longest)) }),
      duration(spent)));
  }));
  // Widths through the CSSOM: the policy allows no inline style attribute.
  for (const bar of table.querySelectorAll('.bar')) bar.style.width = `${bar.dataset.width}%`;
  fill(document.getElementById('pager'),
    el('button', { type: 'button', disabled: pageIndex === 0, onclick: () => setFilter('page', String(pageIndex - 1)) }, 'Previous'),
    el('span', {}, `${rows.length} jobs · page ${pageIndex + 1} of ${pages}`),
    el('button', { type: 'button', disabled: pageIndex >= pages - 1, onclick: () => setFilter('page', String(pageIndex + 1)) }, 'Next'));
  if (shown.length && !page.firstRowsAt) {
    page.firstRowsAt = performance.now();
    document.body.dataset.firstRows = String(Math.round(page.firstRowsAt));
  }
}

function renderReasons() {
  const counts = new Map();
  for (const job of page.jobs.values()) {
    if (job.info.state !== 'FAILED') continue;
    counts.set(job.info.reason, (counts.get(job.info.reason) || 0) + 1);
  }
  const sorted = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8);
  const most = Math.max(1, ...sorted.map(([, n]) => n));
  const node = document.getElementById('reasons');
  if (!sorted.length) {
    fill(node, el('p', { class: 'quiet' }, 'No failures.'));
    return;
  }
  fill(node, ...sorted.map(([reason, n]) => el('div', { class: 'reason-row' },
    el('span', { class: 'reason-name' }, reason),
    el('span', { class: 'reason-bar', 'data-width': String(Math.round((100 * n) / most)) }),
    el('span', { class: 'number' }, String(n)))));
  for (const bar of node.querySelectorAll('.reason-bar')) bar.style.width = `${bar.dataset.width}%`;
}

/** Jobs by state over the last hour, from the service's memory of its minutes. */
async function loadHistory(namespace) {
  const node = document.getElementById('history');
  try {
    const stats = await api(`/v1/stats${namespace ? `?namespace=${encodeURIComponent(namespace)}` : ''}`);
    const minutes = stats.minutes || [];
    const most = Math.max(1, ...minutes.map((m) => STATES.reduce((n, s) => n + (m.counts[s] || 0), 0)));
    fill(node, ...minutes.map((minute) => {
      const column = el('div', { class: 'minute', title: new Date(minute.at).toLocaleTimeString() });
      for (const state of STATES) {
        const n = minute.counts[state] || 0;
        if (!n) continue;
        const part = el('span', { class: `part state-${state.toLowerCase()}`, title: `${state}: ${n}` });
        part.style.height = `${(100 * n) / most}%`;
        column.append(part);
      }
      return column;
    }));
  } catch (error) {
    if (!(error instanceof SignedOut)) fill(node, el('p', { class: 'quiet' }, error.message));
  }
}

// ---- One job ------------------------------------------------------------------------------

async function jobView(id) {
  const p = parts(id);
  const path = `/v1/jobs/${id.split('/').map(encodeURIComponent).join('/')}`;
  const status = el('section', { id: 'job-status', class: 'panel' });
  const story = el('section', { id: 'job-timeline', class: 'panel' }, el('h2', {}, 'Timeline'));
  const logText = el('pre', { id: 'job-log', class: 'log', tabindex: '0' });
  const logNote = el('p', { id: 'job-log-warning', class: 'quiet' });
  const followBox = el('input', { id: 'follow', type: 'checkbox' });
  show(el('article', { id: 'job-view' },
    el('p', {}, el('a', {
      href: '/ui',
      onclick: (event) => { event.preventDefault(); history.length > 1 ? history.back() : go(new URLSearchParams()); },
    }, '← All jobs')),
    el('h1', { class: 'job-title' }, p.name),
    status, story,
    el('section', { class: 'panel' },
      el('h2', {}, 'Log'),
      el('div', { class: 'log-tools' },
        el('label', {}, followBox, ' Follow'),
        el('button', { type: 'button', id: 'log-refresh', onclick: () => tail() }, 'Refresh')),
      logNote, logText)));

  let current = null;
  let confirming = false;
  const render = (info) => {
    // Answers cross on the way (a cancel's reply after the stream's end): an end stands.
    if (current && TERMINAL.has(current.state) && !TERMINAL.has(info.state)) return;
    current = info;
    const details = [
      ['Execution id', info.id], ['Job id', info.jobId || ''], ['Kind', KINDS[p.kind] || p.kind],
      ['Namespace', p.namespace], ['Reason', info.reason], ['Failure class', info.failureClass || ''],
      ['Exit code', info.exitCode === undefined ? '' : String(info.exitCode)],
      ['Started', when(info.startedAt)], ['Finished', when(info.finishedAt)],
      ['Duration', duration(seconds(info.startedAt, info.finishedAt))],
    ];
    // The question stays asked while the status changes under it.
    const cancel = el('div', { class: 'cancel' });
    const ask = () => {
      confirming = true;
      fill(cancel,
        el('span', {}, 'Cancel this job? Its pods stop. '),
        el('button', { type: 'button', id: 'cancel-confirm', class: 'danger', onclick: doCancel }, 'Yes, cancel it'),
        el('button', { type: 'button', id: 'cancel-keep', onclick: () => { confirming = false; fill(cancel, cancelButton); } }, 'Keep it running'));
    };
    const cancelButton = el('button', { type: 'button', id: 'cancel', class: 'danger', onclick: ask }, 'Cancel…');
    if (!TERMINAL.has(info.state) && info.state !== 'CANCELLING') {
      if (confirming) ask();
      else cancel.append(cancelButton);
    }
    fill(status,
      el('div', { class: 'status-line' }, stateBadge(info.state), cancel),
      info.message ? el('p', { id: 'job-message', class: 'message' }, info.message) : null,
      el('dl', { class: 'details' }, details.filter(([, v]) => v !== '').map(([k, v]) =>
        [el('dt', {}, k), el('dd', { 'data-field': k }, v)])),
      partCounts(info));
  };
  const doCancel = async () => {
    confirming = false;
    try {
      const result = await api(`${path}/cancel`, { method: 'POST', body: {} });
      render(result.job);
    } catch (error) {
      if (!(error instanceof SignedOut)) banner(`Cancel failed: ${error.message}`);
    }
  };
  const tail = async () => {
    try {
      const answer = await api(`${path}/logs?lines=500`);
      logText.textContent = answer.log;
      logNote.textContent = answer.warning || '';
    } catch (error) {
      if (!(error instanceof SignedOut)) logNote.textContent = error.message;
    }
  };
  let following = null;
  followBox.addEventListener('change', () => {
    if (following) { following.abort(); following = null; }
    if (!followBox.checked) return;
    logText.textContent = '';
    logNote.textContent = 'Following…';
    following = follow(async (signal) => {
      await read(`${path}/logs?follow=true&lines=100`, signal, (chunk) => {
        logText.append(document.createTextNode(chunk));
        logText.scrollTop = logText.scrollHeight;
      });
      following = null;
      followBox.checked = false;
      // The container ended: what remains to say comes with the tail (last words, a pod gone).
      const answer = await api(`${path}/logs?lines=500`);
      logNote.textContent = answer.warning || 'The container ended.';
    });
  });

  try {
    render(await api(path));
  } catch (error) {
    if (error instanceof SignedOut) return;
    fill(status, el('p', { class: 'error' }, error.message));
    return;
  }
  tail();
  timeline();
  follow((signal) => events(`${path}/events`, signal, (name, data) => {
    if (name !== 'status') return;
    const info = JSON.parse(data);
    const ended = current && !TERMINAL.has(current.state) && TERMINAL.has(info.state);
    render(info);
    if (ended || !current) { timeline(); if (!following) tail(); }
  }));

  async function timeline() {
    try {
      const told = await api(`${path}/timeline`);
      const first = told.steps.find((s) => s.at);
      const spent = told.spent || {};
      const total = (spent.waiting || 0) + (spent.starting || 0) + (spent.running || 0);
      const bar = el('div', { class: 'spent', role: 'img', 'aria-label': 'Where the time went' });
      for (const part of ['waiting', 'starting', 'running']) {
        if (spent[part] === undefined) continue;
        const piece = el('span', { class: `spent-${part}`, title: `${part} ${duration(spent[part])}` });
        piece.style.width = `${total ? (100 * spent[part]) / total : 0}%`;
        bar.append(piece);
      }
      fill(story,
        el('h2', {}, 'Timeline'),
        el('ol', { class: 'steps' }, told.steps.map((step) => el('li', { class: step.warning ? 'warning' : null },
          el('time', { datetime: step.at || '' }, when(step.at)),
          el('span', { class: 'after' }, step.at && first ? `+${duration(seconds(first.at, step.at))}` : ''),
          el('strong', { class: 'what' }, step.what),
          step.object ? el('span', { class: 'object' }, step.object) : null,
          el('span', { class: 'detail' }, step.detail)))),
        el('h3', {}, 'Where the time went'),
        bar,
        el('p', { class: 'quiet' }, ['waiting', 'starting', 'running']
          .filter((part) => spent[part] !== undefined)
          .map((part) => `${part} ${duration(spent[part])}`).join(' · ')),
        told.whatToDo ? el('p', { id: 'what-to-do', class: 'what-to-do' }, `What to do: ${told.whatToDo}`) : null);
    } catch (error) {
      if (!(error instanceof SignedOut)) story.append(el('p', { class: 'error' }, error.message));
    }
  }
}

/** Per-index or per-replicated-job counts, where the kind has them. */
function partCounts(info) {
  if (info.indexes) {
    const x = info.indexes;
    return el('p', { id: 'job-indexes' },
      `Indexes: ${x.succeeded} succeeded, ${x.failed} failed, ${x.running} running, ${x.pending} pending of ${x.completions}`);
  }
  if (info.replicas) {
    return el('table', { id: 'job-replicas', class: 'small' },
      el('thead', {}, el('tr', {}, ['Replicated job', 'Replicas', 'Ready', 'Succeeded', 'Failed', 'Active']
        .map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, info.replicas.replicatedJobs.map((r) => el('tr', {},
        el('td', {}, r.name), el('td', {}, String(r.replicas)), el('td', {}, String(r.ready)),
        el('td', {}, String(r.succeeded)), el('td', {}, String(r.failed)), el('td', {}, String(r.active))))));
  }
  return null;
}

// ---- Routing ------------------------------------------------------------------------------

async function route() {
  closeStreams();
  banner('');
  if (!token()) {
    signIn();
    return;
  }
  if (!page.who) {
    try {
      page.who = await api('/v1/whoami');
    } catch (error) {
      if (!(error instanceof SignedOut)) banner(error.message);
      return;
    }
    document.getElementById('who').textContent = `${page.who.name} · ${page.who.namespaces.join(', ')}`;
    document.getElementById('sign-out').hidden = false;
  }
  const job = params().get('job');
  if (job) await jobView(job);
  else await jobsView();
}

document.getElementById('sign-out').addEventListener('click', () => signIn());
window.addEventListener('popstate', route);
route();
