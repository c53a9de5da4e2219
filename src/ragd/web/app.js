// ragd's web page: plain JavaScript over the REST API (the same API and key as any client).
// Everything a document holds (titles, text, metadata, file names) is put on the page as text nodes, never as
// HTML; the server's Content-Security-Policy allows no inline script. No library, no build step.

const $ = (sel, root = document) => root.querySelector(sel);

// -- elements --------------------------------------------------------------------------------------------------

/** An element: attrs are properties (on* handlers, className, hidden...) or attributes (aria-*, data-*...);
 * children are nodes or strings (strings become text nodes: never parsed as HTML). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'className' || name === 'hidden' || name === 'disabled' || name === 'value' ||
             name === 'checked' || name === 'type' || name === 'htmlFor') el[name] = value;
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function clear(el) { el.replaceChildren(); return el; }

const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const child of children) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}

function bytes(n) {
  if (n === null || n === undefined) return '';
  const units = ['B', 'kB', 'MB', 'GB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function when(iso) { return iso ? new Date(iso).toLocaleString() : ''; }

// -- state and the API -----------------------------------------------------------------------------------------

const state = {
  key: sessionStorage.getItem('ragd.key') || '',
  collection: sessionStorage.getItem('ragd.collection') || '',
  collections: [],
  timers: [],
};

class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.status = status; this.code = code; this.retryAfter = retryAfter;
  }
}

async function api(path, { method = 'GET', body, form, raw = false } = {}) {
  const headers = {};
  if (state.key) headers.Authorization = `Bearer ${state.key}`;
  let payload;
  if (form) payload = form;
  else if (body !== undefined) { headers['Content-Type'] = 'application/json'; payload = JSON.stringify(body); }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload });
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'the ragd server cannot be reached: is `ragd serve` running?');
  }
  if (!res.ok) {
    let err = {};
    try { err = await res.json(); } catch (e) { /* not JSON */ }
    const error = new ApiError(res.status, err.error || `http_${res.status}`, err.message || res.statusText,
                               res.headers.get('Retry-After'));
    if (res.status === 401) askForKey(error.message);
    throw error;
  }
  return raw ? res : res.json();
}

function withCollection(path, extra = {}) {
  const params = new URLSearchParams(extra);
  if (state.collection) params.set('collection', state.collection);
  const q = params.toString();
  return q ? `${path}${path.includes('?') ? '&' : '?'}${q}` : path;
}

function docPath(ref, tail = '') {
  return `/v1/documents/${ref.split('/').map(encodeURIComponent).join('/')}${tail}`;
}

function notice(text, ok = false) {
  const el = $('#notice');
  el.textContent = text;
  el.className = ok ? 'ok' : '';
  el.hidden = !text;
}

function failed(error) {
  if (error instanceof ApiError && error.status === 401) return;  // the key dialog says it
  const wait = error.retryAfter ? ` (retry in ${error.retryAfter} s)` : '';
  notice(`${error.message || error}${wait}`);
}

// -- the API key -----------------------------------------------------------------------------------------------

function askForKey(why) {
  const dialog = $('#key-dialog');
  $('#key-why').textContent = why ? `The server says: ${why}.` : 'This server needs an API key.';
  $('#key-input').value = '';
  if (!dialog.open) dialog.showModal();
  $('#key-input').focus();
}

function setupKey() {
  $('#key-button').addEventListener('click', () => askForKey(''));
  $('#key-form').addEventListener('submit', (event) => {
    event.preventDefault();
    state.key = $('#key-input').value.trim();
    sessionStorage.setItem('ragd.key', state.key);
    $('#key-dialog').close();
    notice('');
    start();
  });
  $('#key-forget').addEventListener('click', () => {
    state.key = '';
    sessionStorage.removeItem('ragd.key');
    $('#key-dialog').close();
    start();
  });
}

function confirmDialog(text, label = 'Delete') {
  const dialog = $('#confirm-dialog');
  $('#confirm-text').textContent = text;
  $('#confirm-ok').textContent = label;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'),
                                                          { once: true }));
}

// -- collections -----------------------------------------------------------------------------------------------

async function loadCollections() {
  const { collections } = await api('/v1/collections');
  state.collections = collections;
  const select = clear($('#collection'));
  const names = collections.map((c) => c.name);
  if (!names.includes(state.collection)) state.collection = names[0] || '';
  for (const name of names) append(select, [h('option', { value: name }, name)]);
  if (!names.length) append(select, [h('option', { value: '' }, '(none yet)')]);
  select.value = state.collection;
}

function setupCollections() {
  $('#collection').addEventListener('change', (event) => {
    state.collection = event.target.value;
    sessionStorage.setItem('ragd.collection', state.collection);
    route();
  });
}

// -- routing ---------------------------------------------------------------------------------------------------

const views = {};

function route() {
  for (const t of state.timers) clearTimeout(t);
  state.timers = [];
  const hash = location.hash.replace(/^#\/?/, '') || 'ask';
  const [name, ...rest] = hash.split('/');
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === name) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const view = clear($('#view'));
  const render = views[name] || views.ask;
  Promise.resolve(render(view, rest.map(decodeURIComponent).join('/'))).catch(failed);
}

async function start() {
  try {
    await loadCollections();
    notice('');
  } catch (error) {
    failed(error);
    clear($('#view'));
    return;
  }
  route();
}

// -- ask -------------------------------------------------------------------------------------------------------

const MARKER = /\[chunk:([0-9a-fA-F-]{36})\]/g;

views.ask = (view) => {
  const question = h('textarea', { id: 'question', rows: 3, required: true, 'aria-describedby': 'ask-help',
                                   placeholder: 'Ask a question about the documents of this collection' });
  const debug = h('input', { type: 'checkbox', id: 'debug' });
  const askButton = h('button', { type: 'submit', id: 'ask' }, 'Ask');
  const searchButton = h('button', { type: 'button', id: 'search', className: 'quiet' }, 'Search only');
  const answer = h('article', { id: 'answer', className: 'answer panel', 'aria-live': 'polite',
                                'aria-label': 'Answer', hidden: true });
  const sources = h('ol', { id: 'source-list', className: 'sources', 'aria-label': 'Cited sources' });
  const sourceView = h('div', { id: 'source-view', className: 'source-view' });
  const debugView = h('section', { id: 'debug-view', className: 'debug panel', hidden: true,
                                   'aria-label': 'Debug' });
  const form = h('form', { id: 'ask-form', className: 'panel' },
    h('label', { htmlFor: 'question' }, h('strong', {}, 'Question')), question,
    h('p', { id: 'ask-help', className: 'muted small' }, 'Enter asks; Shift+Enter starts a new line.'),
    h('div', { className: 'row' }, askButton, searchButton,
      h('label', {}, debug, ' Debug: plan, legs, scores and timings')));
  append(view, [h('div', { className: 'ask' },
    h('div', { className: 'left' }, form, answer, debugView),
    h('aside', { className: 'right panel', 'aria-label': 'Sources' }, h('h2', {}, 'Sources'), sources, sourceView,
      h('p', { id: 'sources-empty', className: 'muted small' }, 'Cited passages appear here.')))]);
  question.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
  });
  const ui = { question, debug, askButton, searchButton, answer, sources, sourceView, debugView };
  form.addEventListener('submit', (event) => { event.preventDefault(); ask(ui).catch(failed); });
  searchButton.addEventListener('click', () => searchOnly(ui).catch(failed));
  question.focus();
};

function busy(ui, on) { ui.askButton.disabled = on; ui.searchButton.disabled = on; }

function resetAnswer(ui) {
  notice('');
  clear(ui.answer); ui.answer.hidden = false; ui.answer.classList.remove('abstained');
  clear(ui.sources); clear(ui.sourceView); clear(ui.debugView); ui.debugView.hidden = true;
  $('#sources-empty').hidden = false;
}

async function ask(ui) {
  const text = ui.question.value.trim();
  if (!text) return;
  resetAnswer(ui);
  busy(ui, true);
  ui.answer.setAttribute('aria-busy', 'true');
  const body = { question: text, stream: true, debug: ui.debug.checked };
  if (state.collection) body.collection = state.collection;
  let streamed = '';
  let done = null;
  try {
    const res = await api('/v1/query', { method: 'POST', body, raw: true });
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done: ended } = await reader.read();
      if (ended) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = parseEvent(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
        if (event.name === 'token') { streamed += event.data.text; renderAnswer(ui, streamed, true); }
        else if (event.name === 'done') done = event.data;
      }
    }
  } finally {
    busy(ui, false);
    ui.answer.removeAttribute('aria-busy');
  }
  if (!done) throw new Error('the answer stream ended early: ask again');
  if (done.abstained) await renderAbstention(ui, done, text);
  else await renderAnswered(ui, done);
  if (ui.debug.checked && done.debug) renderDebug(ui, done.debug);
}

function parseEvent(block) {
  let name = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) name = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
  }
  return { name, data: data.length ? JSON.parse(data.join('\n')) : null };
}

/** The answer's text with its [chunk:ID] markers as numbered chips (numbered by first appearance). */
function renderAnswer(ui, text, partial, numbers = new Map()) {
  const shown = partial ? text.replace(/\[[^\]]*$/, '') : text;  // a marker still arriving is not shown
  const parts = [];
  let last = 0;
  for (const m of shown.matchAll(MARKER)) {
    parts.push(shown.slice(last, m.index));
    const id = m[1].toLowerCase();
    if (!numbers.has(id)) numbers.set(id, numbers.size + 1);
    const n = numbers.get(id);
    parts.push(h('button', { type: 'button', className: 'chip', 'data-chunk': id, 'aria-pressed': 'false',
                             'aria-label': `Source ${n}`, onclick: () => showSource(ui, id) }, String(n)));
    last = m.index + m[0].length;
  }
  parts.push(shown.slice(last));
  append(clear(ui.answer), parts);
  return numbers;
}

// A computed answer's operand as the answer writes it: "Net sales / 2021: 10,000 million [page 40]" (the row's
// label, its column, the cell as printed): the label and the cell are what is marked on the page.
const OPERAND = /(?:^|[(;]\s*)([^;(\[\]]+?) \/ [^;:()\[\]]+: (\(?-?[\d.,]+\)?%?)(?:\s+(?:thousand|million|billion))?(?:\s+\[page \d+\])?\s*$/;

/** Per cited chunk, the answer's sentences that cite it (the text before each of its markers); for a computed
 *  answer's operand, its row label and its cell. */
function quotesOf(text) {
  const quotes = new Map();
  let last = 0;
  for (const m of text.matchAll(MARKER)) {
    const sentence = text.slice(last, m.index).replace(MARKER, '').trim();
    const id = m[1].toLowerCase();
    const operand = sentence.match(OPERAND);
    const found = operand ? [operand[1].trim(), operand[2]] : [sentence];
    if (sentence) quotes.set(id, [...(quotes.get(id) || []), ...found]);
    last = m.index + m[0].length;
  }
  return quotes;
}

const chunks = new Map();  // chunk id -> its details, for this page's life (per collection)

async function chunkDetails(id) {
  const key = `${state.collection}/${id}`;
  if (!chunks.has(key)) chunks.set(key, await api(withCollection(`/v1/chunks/${id}`)));
  return chunks.get(key);
}

async function renderAnswered(ui, response) {
  const numbers = renderAnswer(ui, response.answer, false);
  for (const c of response.citations) {
    const id = c.chunk_id.toLowerCase();
    if (!numbers.has(id)) numbers.set(id, numbers.size + 1);
  }
  ui.quotes = quotesOf(response.answer);
  ui.numbers = numbers;
  $('#sources-empty').hidden = numbers.size > 0;
  const items = [...numbers.entries()].sort((a, b) => a[1] - b[1]);
  for (const [id, n] of items) {
    const li = h('li', {}, h('button', { type: 'button', 'data-chunk': id, 'aria-pressed': 'false',
                                         onclick: () => showSource(ui, id) }, `[${n}] …`));
    append(ui.sources, [li]);
    chunkDetails(id).then((c) => {
      const where = [c.version_label, (c.heading_path || []).join(' › '),
                     c.pages && c.pages.length ? `p. ${c.pages.join(', ')}` : ''].filter(Boolean).join(' · ');
      const button = $('button', li);
      clear(button);
      append(button, [h('strong', {}, `[${n}] ${c.title || c.external_id}`), h('br'),
                      h('span', { className: 'muted small' }, where)]);
    }).catch(failed);
  }
  if (items.length) await showSource(ui, items[0][0], false);
}

async function renderAbstention(ui, response, question) {
  ui.answer.classList.add('abstained');
  append(clear(ui.answer), [h('span', { className: 'verdict' }, 'Not enough evidence'), response.answer]);
  const body = { query: question, limit: 3 };
  if (state.collection) body.namespace = state.collection;
  const found = await api('/v1/search', { method: 'POST', body });
  $('#sources-empty').hidden = found.results.length > 0;
  if (!found.results.length) return;
  append(ui.sourceView, [h('h3', {}, 'Closest passages — not enough evidence to answer')]);
  for (const r of found.results) {
    append(ui.sourceView, [h('div', { className: 'closest' },
      h('strong', {}, r.metadata && r.metadata.title ? r.metadata.title : r.sourceId), h('br'),
      h('span', { className: 'small' }, r.content.length > 400 ? `${r.content.slice(0, 400)}…` : r.content))]);
  }
}

async function showSource(ui, id, focus = true) {
  for (const el of document.querySelectorAll('[data-chunk]')) {
    el.setAttribute('aria-pressed', el.dataset.chunk === id ? 'true' : 'false');
  }
  const token = (ui.showing = {});  // a later click wins over one still loading
  const c = await chunkDetails(id);
  const quotes = (ui.quotes && ui.quotes.get(id)) || [];
  const n = ui.numbers ? ui.numbers.get(id) : '';
  const view = h('div');
  const title = h('h3', { tabindex: '-1' }, `[${n}] ${c.title || c.external_id}`);
  append(view, [title, h('p', { className: 'muted small' },
    `${c.external_id} · ${c.version_label}${c.heading_path && c.heading_path.length ? ` · ${c.heading_path.join(' › ')}` : ''}`)]);
  const drawable = c.has_original && c.pages && c.pages.length &&
                   (c.media_type === 'application/pdf' || (c.media_type || '').startsWith('image/'));
  if (drawable) {
    const pages = [...new Set(c.boxes.map((b) => b.page))].sort((a, b) => a - b);
    const pageList = pages.length ? pages : c.pages;
    const holder = h('div', { className: 'page-image' });
    const zoom = h('button', { type: 'button', className: 'quiet', 'aria-pressed': 'false' }, 'Zoom in');
    zoom.addEventListener('click', () => {
      const on = holder.classList.toggle('zoomed');
      zoom.setAttribute('aria-pressed', String(on));
      zoom.textContent = on ? 'Zoom out' : 'Zoom in';
      const img = $('img', holder);
      const boxes = img ? JSON.parse(img.dataset.boxes || '[]') : [];
      if (on && boxes.length) { holder.scrollTop = Math.max(0, boxes[0][1] - 40); holder.scrollLeft = Math.max(0, boxes[0][0] - 40); }
    });
    append(view, [h('div', { className: 'row' }, zoom), holder]);
    for (const page of pageList) await drawPage(holder, c, page, quotes);
  }
  append(view, [h('div', { className: 'source-text', 'aria-label': 'Cited passage' }, marked(c.content, quotes))]);
  if (ui.showing !== token) return;
  ui.sourceView.replaceChildren(...view.childNodes);
  if (focus) title.focus();
}

async function drawPage(holder, c, page, quotes) {
  const params = new URLSearchParams({ chunk: c.chunk_id });
  for (const q of quotes) params.append('quote', q);
  if (state.collection) params.set('collection', state.collection);
  const res = await api(docPath(c.external_id, `/pages/${page}.png?${params}`), { raw: true });
  const url = URL.createObjectURL(await res.blob());
  const img = h('img', { src: url, alt: `Page ${page} of ${c.title || c.external_id}, the cited passage highlighted`,
                         'data-page': page, 'data-boxes': res.headers.get('X-Ragd-Boxes') || '[]' });
  append(holder, [h('p', { className: 'muted small' }, `Page ${page}`), img]);
}

/** Text with each quote's occurrences marked (text nodes and <mark>s only). */
function marked(text, quotes) {
  const spans = [];
  for (const q of quotes) {
    for (const probe of [q, q.slice(0, 60)]) {
      const at = probe.length >= 12 ? text.indexOf(probe) : -1;
      if (at >= 0) { spans.push([at, at + (probe === q ? q.length : probe.length)]); break; }
    }
  }
  spans.sort((a, b) => a[0] - b[0]);
  const out = [];
  let last = 0;
  for (const [from, to] of spans) {
    if (from < last) continue;
    out.push(text.slice(last, from), h('mark', {}, text.slice(from, to)));
    last = to;
  }
  out.push(text.slice(last));
  return out;
}

function renderDebug(ui, debug) {
  const view = clear(ui.debugView);
  view.hidden = false;
  const plan = debug.plan || {};
  append(view, [h('h2', {}, 'Debug'),
    h('p', { className: 'small' }, `query ${debug.query_id || ''} · ${debug.generator || ''} · reranker `,
      debug.reranker_used ? `${debug.reranker} (${debug.reranker_latency_ms} ms)` : 'not used',
      debug.evidence ? ` · evidence ${debug.evidence.signal} ${debug.evidence.score} (threshold ` +
                       `${debug.evidence.threshold})` : ''),
    h('h3', {}, 'Plan'), keyValues(plan),
    h('h3', {}, 'Retrieved'), legTable(debug.retrieved || []),
    h('h3', {}, 'Stage timings'), timings(debug.timings_ms || {}, debug.latency_ms)]);
}

function keyValues(obj) {
  return h('table', {}, h('tbody', {}, Object.entries(obj).map(([k, v]) =>
    h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, typeof v === 'object' ? JSON.stringify(v) : String(v))))));
}

function fmt(v, digits = 4) { return v === null || v === undefined ? '–' : Number(v).toFixed(digits); }

function legTable(rows) {
  return h('table', { className: 'legs' },
    h('thead', {}, h('tr', {}, ['#', 'Title', 'Vector rank', 'Vector score', 'Lexical rank', 'Lexical score',
                                 'Fused', 'Rerank'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.map((r, i) => h('tr', {},
      h('td', { className: 'num' }, String(i + 1)), h('td', {}, r.title || r.chunk_id),
      h('td', { className: 'num' }, r.vector_rank ?? '–'), h('td', { className: 'num' }, fmt(r.vector_score)),
      h('td', { className: 'num' }, r.lexical_rank ?? '–'), h('td', { className: 'num' }, fmt(r.lexical_score)),
      h('td', { className: 'num' }, fmt(r.score)), h('td', { className: 'num' }, fmt(r.rerank_score, 3))))));
}

function timings(ms, total) {
  const most = Math.max(1, ...Object.values(ms));
  return h('table', { className: 'bars' }, h('tbody', {},
    Object.entries(ms).map(([stage, v]) => {
      const bar = h('span');
      bar.style.width = `${Math.max(1, Math.round(200 * v / most))}px`;
      return h('tr', {}, h('th', { scope: 'row' }, stage), h('td', { className: 'num' }, `${v} ms`), h('td', {}, bar));
    }),
    total !== undefined ? h('tr', {}, h('th', { scope: 'row' }, 'total'), h('td', { className: 'num' }, `${total} ms`),
                            h('td')) : null));
}

async function searchOnly(ui) {
  const text = ui.question.value.trim();
  if (!text) return;
  resetAnswer(ui);
  busy(ui, true);
  try {
    const body = { query: text, limit: 10 };
    if (state.collection) body.namespace = state.collection;
    const found = await api('/v1/search', { method: 'POST', body });
    append(ui.answer, [h('span', { className: 'verdict' }, `${found.results.length} results in ${found.latencyMs} ms`
                                                           + (found.rerankingApplied ? ', reranked' : ''))]);
    const debugOn = ui.debug.checked;
    const head = ['#', 'Document', 'Passage', ...(debugOn ? ['Similarity', 'Keyword', 'Combined', 'Rerank'] : [])];
    append(ui.answer, [h('table', { id: 'search-results' },
      h('thead', {}, h('tr', {}, head.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, found.results.map((r, i) => h('tr', {},
        h('td', { className: 'num' }, String(i + 1)), h('td', {}, r.sourceId),
        h('td', { className: 'small' }, r.content.length > 300 ? `${r.content.slice(0, 300)}…` : r.content),
        debugOn ? [h('td', { className: 'num' }, fmt(r.similarity)), h('td', { className: 'num' }, fmt(r.keywordRank)),
                   h('td', { className: 'num' }, fmt(r.combinedScore)),
                   h('td', { className: 'num' }, fmt(r.rerankScore, 3))] : null))))]);
  } finally {
    busy(ui, false);
  }
}

// -- documents -------------------------------------------------------------------------------------------------

const TYPES = ['', 'pdf', 'docx', 'pptx', 'xlsx', 'csv', 'html', 'markdown', 'text', 'json', 'jsonl', 'email',
               'image', 'rtf'];

views.documents = async (view, ref) => {
  if (ref) return documentPage(view, ref);
  const files = h('input', { type: 'file', multiple: true, id: 'file-input', hidden: true });
  const choose = h('button', { type: 'button', id: 'choose-files' }, 'Choose files');
  const drop = h('div', { className: 'drop', id: 'drop' }, h('p', {}, 'Drop files here to add them to ',
    h('strong', {}, state.collection || 'the default collection'), ', or ', choose), files);
  const runView = h('section', { id: 'upload-run', 'aria-live': 'polite' });
  const find = h('input', { type: 'search', id: 'doc-find', placeholder: 'Title or id', 'aria-label': 'Find by title' });
  const tag = h('input', { type: 'text', id: 'doc-tag', placeholder: 'Tag', 'aria-label': 'Tag' });
  const type = h('select', { id: 'doc-type', 'aria-label': 'Type' },
    TYPES.map((t) => h('option', { value: t }, t || 'any type')));
  const list = h('div', { id: 'doc-list' });
  append(view, [h('h1', {}, 'Documents'), drop, runView,
    h('div', { className: 'row' }, find, tag, type), list]);
  choose.addEventListener('click', () => files.click());
  files.addEventListener('change', () => upload([...files.files], runView, list).catch(failed));
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    upload([...e.dataTransfer.files], runView, list).catch(failed);
  });
  const filters = { find, tag, type };
  let typing;
  for (const input of [find, tag, type]) {
    input.addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(() => listDocuments(list, filters, 0).catch(failed), 250);
    });
  }
  list.filters = filters;
  await listDocuments(list, filters, 0);
};

const PAGE = 50;

async function listDocuments(list, filters, offset) {
  if (!state.collection) { append(clear(list), [h('p', { className: 'muted' }, 'No documents yet: drop files above.')]); return; }
  const params = { limit: PAGE, offset };
  if (filters.find.value.trim()) params.q = filters.find.value.trim();
  if (filters.tag.value.trim()) params.tag = filters.tag.value.trim();
  if (filters.type.value) params.type = filters.type.value;
  const { documents, total } = await api(withCollection('/v1/documents', params));
  clear(list);
  append(list, [h('p', { className: 'muted small', id: 'doc-count' }, `${total} document${total === 1 ? '' : 's'}`),
    h('table', { id: 'documents' },
      h('thead', {}, h('tr', {}, ['Title', 'Id', 'Type', 'Versions', 'Size', 'Chunks', 'Updated', ''].map(
        (t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, documents.map((d) => h('tr', { 'data-ref': d.external_id },
        h('td', {}, h('a', { href: `#/documents/${encodeURIComponent(d.external_id)}` }, d.title || d.external_id)),
        h('td', { className: 'small' }, d.external_id), h('td', {}, d.source_type),
        h('td', { className: 'num' }, String(d.versions)), h('td', { className: 'num' }, bytes(d.size)),
        h('td', { className: 'num' }, String(d.chunk_count ?? '')), h('td', { className: 'small' }, when(d.updated_at)),
        h('td', {}, h('button', { type: 'button', className: 'quiet', 'aria-label': `Delete ${d.title || d.external_id}`,
                                  onclick: () => deleteDocument(d).then(() => listDocuments(list, filters, offset))
                                    .catch(failed) },
                      'Delete'))))))]);
  const pager = h('div', { className: 'row' });
  if (offset > 0) append(pager, [h('button', { type: 'button', className: 'quiet',
    onclick: () => listDocuments(list, filters, Math.max(0, offset - PAGE)).catch(failed) }, 'Previous')]);
  if (offset + PAGE < total) append(pager, [h('button', { type: 'button', className: 'quiet',
    onclick: () => listDocuments(list, filters, offset + PAGE).catch(failed) }, 'Next')]);
  append(list, [pager]);
}

/** Delete a document once the person confirms; whether it was deleted. */
async function deleteDocument(d) {
  const name = d.title || d.external_id;
  if (!await confirmDialog(`Delete “${name}” and every version of it? Searches stop finding it at once.`)) return false;
  await api(withCollection(docPath(d.external_id)), { method: 'DELETE' });
  notice(`Deleted ${name}.`, true);
  return true;
}

async function upload(fileList, runView, list) {
  if (!fileList.length) return;
  const form = new FormData();
  for (const f of fileList) form.append('files', f, f.name);
  clear(runView);
  notice('');
  const queued = await api(withCollection('/v1/documents', { wait: 'false' }), { method: 'POST', form });
  await watchRun(runView, queued.run_id, fileList.map((f) => f.name));
  if (!state.collection) {  // the first upload made the collection
    await loadCollections();
    if (!state.collection && queued.collection) state.collection = queued.collection;
  }
  if (list && list.filters) await listDocuments(list, list.filters, 0);
}

/** Follow a run until it ends: a bar, each file's state and its items' outcomes. */
async function watchRun(view, runId, names = []) {
  const began = Date.now();
  for (;;) {
    const run = await api(`/v1/runs/${runId}`);
    renderRun(view, run, names, Date.now() - began);
    if (!['queued', 'running'].includes(run.status)) return run;
    await new Promise((resolve) => { state.timers.push(setTimeout(resolve, 600)); });
    if (!document.body.contains(view)) return run;  // the page moved on
  }
}

const PART = 1000000;  // a queued run numbers file k's items from k x 1,000,000

function renderRun(view, run, names, waited) {
  const progress = run.progress || {};
  const files = progress.files || {};
  const total = files.total || names.length || 1;
  const done = (files.done || 0) + (files.cancelled || 0);
  const bar = h('span');
  bar.style.width = `${Math.round(100 * (run.status === 'queued' || run.status === 'running' ? done / total : 1))}%`;
  const byFile = new Map();
  for (const item of run.items || []) {
    const k = Math.floor(item.item_index / PART);
    byFile.set(k, [...(byFile.get(k) || []), item]);
  }
  const rows = (run.file_list && run.file_list.length ? run.file_list : []).map((f) => {
    const items = byFile.get(f.ordinal) || [];
    return h('tr', { 'data-file': f.name },
      h('td', {}, f.name), h('td', {}, h('span', { className: `status ${f.status}` }, f.status)),
      h('td', {}, items.map((i) => h('div', {}, h('span', { className: `status ${i.status}` }, i.status), ' ',
        i.external_id && i.external_id !== f.name ? `${i.external_id} ` : '',
        i.status === 'failed' || i.status === 'skipped' ? failureText(i) : `${i.chunk_count} chunks`))));
  });
  const stuck = run.status === 'queued' && waited > 10000 && !(files.running || files.done);
  clear(view);
  append(view, [h('div', { className: 'panel', id: `run-${run.run_id}` },
    h('p', {}, h('strong', {}, 'Run '), h('a', { href: `#/runs/${run.run_id}` }, run.run_id.slice(0, 8)), ' ',
      h('span', { className: `status ${run.status}`, id: 'run-status' }, run.status),
      ` ${done} of ${total} files `,
      run.status === 'queued' || run.status === 'running' ? h('button', { type: 'button', className: 'quiet',
        id: 'cancel-run', onclick: () => api(`/v1/runs/${run.run_id}/cancel`, { method: 'POST' }).catch(failed) },
        'Cancel') : null),
    h('div', { className: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': total,
               'aria-valuenow': done }, bar),
    stuck ? h('p', { className: 'hint' }, 'No worker has taken these files yet: start `ragd worker`, or run ' +
                                          '`ragd serve` with jobs on (RAGD_SERVE_JOBS=on).') : null,
    rows.length ? h('table', { className: 'files' }, h('thead', {}, h('tr', {},
      ['File', 'State', 'Outcome'].map((t) => h('th', { scope: 'col' }, t)))), h('tbody', {}, rows)) : null)]);
}

const HINTS = {  // what to do about each failure code of a run's items (ragd/errors.py)
  file_too_large: 'Split the file, or raise RAGD_MAX_FILE_BYTES (or RAGD_EXTRACT_MEMORY_MB, as the reason says).',
  encrypted_document: 'Remove the password (save an unprotected copy) and upload it again.',
  unsupported_format: 'Convert it to a supported format (PDF, DOCX, PPTX, XLSX, HTML, Markdown, text, images).',
  corrupt_document: 'The file is damaged: export or download it again.',
  empty_document: 'Nothing to index: the file holds no text (a scan too faint to read?).',
  timeout: 'Reading took too long: split the file, or raise RAGD_EXTRACT_TIMEOUT_S.',
  not_a_regular_file: 'Only regular files are read: copy the data into a file.',
  no_original: 'Ingest the file again: its original was not kept.',
  symlink_outside_folder: 'A link out of the folder: ingest its target, or ingest with --follow-symlinks.',
  symlink_loop: 'A link that points back into itself: remove it.',
  symlink_dangling: 'A link to nothing: remove it, or restore its target.',
  embedding_error: 'The embedder failed on this text: retry; if it persists, report it with the run id.',
  provider_unavailable: 'The embedding service was unavailable: retry the upload later.',
  originals_unavailable: 'The store of original files could not be reached: retry the upload later.',
  database_unavailable: 'The database was unavailable: retry the upload later.',
  store_error: 'Storing failed: retry; if it persists, check the server log with the run id.',
  unexpected_error: 'An unexpected error: retry, and report it with the run id if it persists.',
};

function failureText(item) {
  const hint = HINTS[item.error_code] || '';
  return [h('code', {}, item.error_code || ''), ' ', item.reason || '', hint ? h('div', { className: 'hint' }, hint) : null];
}

async function documentPage(view, ref) {
  const doc = await api(withCollection(docPath(ref)));
  const active = doc.versions.find((v) => v.is_active) || doc.versions[doc.versions.length - 1];
  append(view, [h('p', {}, h('a', { href: '#/documents' }, '← Documents')),
    h('h1', { id: 'doc-title' }, doc.title || doc.external_id),
    h('div', { className: 'row' },
      active && active.source_sha256 ? h('button', { type: 'button', id: 'download',
        onclick: () => download(doc.external_id, active).catch(failed) }, 'Download original') : null,
      h('button', { type: 'button', className: 'danger', id: 'delete-doc', onclick: () => deleteDocument(doc)
        .then((deleted) => { if (deleted) location.hash = '#/documents'; }).catch(failed) }, 'Delete')),
    keyValues({ id: doc.external_id, type: doc.source_type, tags: (doc.tags || []).join(', '),
                source: doc.source_uri, ...doc.metadata }),
    h('h2', {}, 'Versions'),
    h('table', { id: 'versions' }, h('thead', {}, h('tr', {}, ['Version', 'Active', 'Chunks', 'File', 'Created', ''].map(
      (t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, doc.versions.map((v) => h('tr', {}, h('td', {}, v.version_label), h('td', {}, v.is_active ? 'yes' : ''),
        h('td', { className: 'num' }, String(v.chunk_count)), h('td', { className: 'small' }, v.source_name || ''),
        h('td', { className: 'small' }, when(v.created_at)),
        h('td', {}, v.source_sha256 ? h('button', { type: 'button', className: 'quiet',
          onclick: () => download(doc.external_id, v).catch(failed) }, 'Download') : null))))),
    h('h2', {}, 'Content')]);
  const blocks = h('div', { className: 'blocks panel', id: 'blocks' });
  append(view, [blocks]);
  try {
    const read = await api(withCollection(docPath(ref, '/blocks')));
    renderBlocks(blocks, read.blocks);
  } catch (error) {
    append(blocks, [h('p', { className: 'muted' }, error.message)]);
  }
}

function renderBlocks(holder, blocks) {
  let page = null;
  let list = null;
  for (const b of blocks) {
    if (b.page && b.page !== page) { page = b.page; append(holder, [h('p', { className: 'page' }, `page ${page}`)]); }
    if (b.type !== 'list') list = null;
    if (b.type === 'heading') append(holder, [h(`h${Math.min(6, 2 + (b.level || 1))}`, {}, b.text)]);
    else if (b.type === 'table') append(holder, [tableOf(b)]);
    else if (b.type === 'code') append(holder, [h('pre', {}, b.text)]);
    else if (b.type === 'list') {
      if (!list) { list = h('ul'); append(holder, [list]); }
      append(list, [h('li', {}, b.text)]);
    } else append(holder, [h('p', {}, b.text)]);
  }
}

function tableOf(block) {
  const header = block.header || [];
  return h('table', {}, block.text && !block.rows.length ? h('caption', {}, block.text) : null,
    header.length ? h('thead', {}, h('tr', {}, header.map((c) => h('th', { scope: 'col' }, c ?? '')))) : null,
    h('tbody', {}, (block.rows || []).map((row) => h('tr', {}, row.map((c) => h('td', {}, c ?? ''))))));
}

async function download(ref, version) {
  const res = await api(withCollection(docPath(ref, '/source'), { version: version.doc_version_id }), { raw: true });
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', { href: url, download: (version.source_name || 'original').split('/').pop() });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// -- runs ------------------------------------------------------------------------------------------------------

views.runs = async (view, id) => {
  if (id) {
    append(view, [h('p', {}, h('a', { href: '#/runs' }, '← Runs')), h('h1', {}, `Run ${id.slice(0, 8)}`)]);
    const holder = h('div');
    append(view, [holder]);
    const run = await watchRun(holder, id);
    const items = h('table', { id: 'run-items' },
      h('thead', {}, h('tr', {}, ['#', 'Item', 'Outcome', 'Chunks', 'What happened'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, run.items.map((i, n) => h('tr', {},
        h('td', { className: 'num' }, String(n + 1)), h('td', { className: 'small' }, i.external_id || i.source_uri),
        h('td', {}, h('span', { className: `status ${i.status}` }, i.status)),
        h('td', { className: 'num' }, String(i.chunk_count)),
        h('td', { className: 'small' }, i.error_code ? failureText(i) : i.reason || '')))));
    append(view, [h('h2', {}, 'Items'), items]);
    if (run.error) append(view, [h('p', { className: 'hint' }, run.error)]);
    return;
  }
  append(view, [h('h1', {}, 'Ingestion runs')]);
  if (!state.collection) { append(view, [h('p', { className: 'muted' }, 'No collection yet.')]); return; }
  const { runs } = await api(withCollection('/v1/runs', { limit: 50 }));
  append(view, [h('table', { id: 'runs' },
    h('thead', {}, h('tr', {}, ['Run', 'Status', 'Started', 'Items', 'Failed', 'Chunks'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, runs.map((r) => {
      const counts = (r.stats && r.stats.counts) || {};
      return h('tr', {}, h('td', {}, h('a', { href: `#/runs/${r.run_id}` }, r.run_id.slice(0, 8))),
        h('td', {}, h('span', { className: `status ${r.status}` }, r.status)), h('td', { className: 'small' }, when(r.started_at)),
        h('td', { className: 'num' }, String((r.stats && r.stats.items) ?? '')),
        h('td', { className: 'num' }, String(counts.failed || 0)),
        h('td', { className: 'num' }, String((r.stats && r.stats.chunks) ?? '')));
    })))]);
};

// -- collections and quality -----------------------------------------------------------------------------------

views.collections = async (view) => {
  append(view, [h('h1', {}, 'Collections'),
    h('table', { id: 'collections' },
      h('thead', {}, h('tr', {}, ['Name', 'Model', 'Dimensions', 'Documents', 'Chunks', 'Tokens', 'Originals', 'Created'].map(
        (t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, state.collections.map((c) => h('tr', {},
        h('td', {}, c.name), h('td', {}, c.embed_model), h('td', { className: 'num' }, String(c.embed_dims)),
        h('td', { className: 'num' }, String(c.documents)), h('td', { className: 'num' }, String(c.chunks)),
        h('td', { className: 'num' }, String(c.tokens ?? '')), h('td', { className: 'num' }, bytes(c.original_bytes)),
        h('td', { className: 'small' }, when(c.created_at)))))),
    h('h2', {}, 'Quality over time')]);
  const { evaluations } = await api('/v1/evals');
  if (!evaluations.length) {
    append(view, [h('p', { className: 'muted', id: 'no-evals' },
      'No evaluations kept yet: run `ragd eval DATA --save` (retrieval) or `ragd eval DATA --answers --save`.')]);
    return;
  }
  const charts = h('div', { className: 'charts', id: 'charts' });
  append(view, [charts]);
  const metrics = [['ndcg@10', 'nDCG@10'], ['mrr@10', 'MRR@10'], ['abstain_f1', 'Abstain F1'],
                   ['latency_p50_ms', 'Latency p50 (ms)'], ['latency_p95_ms', 'Latency p95 (ms)']];
  for (const [metric, label] of metrics) {
    const series = new Map();
    evaluations.forEach((e, i) => {
      for (const [plan, figures] of Object.entries(e.metrics)) {
        if (typeof figures[metric] !== 'number') continue;
        const name = `${e.dataset} · ${plan}`;
        series.set(name, [...(series.get(name) || []), { x: i, y: figures[metric], at: e.created_at }]);
      }
    });
    if (series.size) append(charts, [lineChart(label, series, evaluations.length)]);
  }
}

const COLORS = ['#1f4e79', '#c0392b', '#1d6b32', '#8e44ad', '#d35400', '#16a085', '#7f8c8d', '#b7950b'];

function lineChart(label, series, count) {
  const W = 420, H = 220, L = 48, R = 12, T = 12, B = 28;
  const ys = [...series.values()].flat().map((p) => p.y);
  let lo = Math.min(...ys), hi = Math.max(...ys);
  if (hi - lo < 1e-9) { lo -= 0.5; hi += 0.5; }
  const x = (i) => L + (count > 1 ? (i * (W - L - R)) / (count - 1) : (W - L - R) / 2);
  const y = (v) => T + (H - T - B) * (1 - (v - lo) / (hi - lo));
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `${label} per evaluation` });
  svg.append(s('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#999' }),
             s('line', { x1: L, y1: T, x2: L, y2: H - B, stroke: '#999' }),
             s('text', { x: L - 4, y: T + 4, 'text-anchor': 'end', 'font-size': 10 }, hi.toFixed(3)),
             s('text', { x: L - 4, y: H - B, 'text-anchor': 'end', 'font-size': 10 }, lo.toFixed(3)),
             s('text', { x: (W + L) / 2, y: H - 8, 'text-anchor': 'middle', 'font-size': 10 }, 'evaluations, oldest first'));
  const legend = h('div', { className: 'legend' });
  [...series.entries()].forEach(([name, points], k) => {
    const color = COLORS[k % COLORS.length];
    svg.append(s('polyline', { points: points.map((p) => `${x(p.x)},${y(p.y)}`).join(' '), fill: 'none',
                               stroke: color, 'stroke-width': 2 }));
    for (const p of points) {
      svg.append(s('circle', { cx: x(p.x), cy: y(p.y), r: 3, fill: color },
                   s('title', {}, `${name}: ${p.y} (${when(p.at)})`)));
    }
    const swatch = h('i');
    swatch.style.background = color;
    append(legend, [h('span', {}, swatch, name)]);
  });
  return h('figure', { className: 'chart panel', 'data-metric': label }, h('figcaption', {}, h('strong', {}, label)), svg, legend);
}

// -- start -----------------------------------------------------------------------------------------------------

setupKey();
setupCollections();
window.addEventListener('hashchange', route);
start().then(() => { document.documentElement.dataset.ready = 'true'; });
