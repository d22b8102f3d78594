// The agent's status page: plugins, volumes, allocations with their events,
// and a live event feed, read from the agent's own API (the same paths and
// the same ACL token as the CLI). Plain browser JavaScript, served as it is:
// there is no build step. Every value from the agent is put on the page as
// text (textContent), never as HTML: plugin names, volume names and event
// messages are whatever a job or a plugin said.
'use strict';

const TOKEN_KEY = 'csiplug-token';
const TOKEN_HEADER = 'X-Nomad-Token';
/** How often the tables are read again when no event says something changed. */
const REFRESH_MS = 5000;
/** Volume usage (NodeGetVolumeStats through the plugin) is read at most this often, and apart from the tables. */
const USAGE_MS = 15000;
/** A burst of events is at most one refresh a second: an event brings a refresh forward, never pushes one back. */
const MIN_GAP_MS = 1000;
/** How long a request may take; a hung plugin or a full connection pool must not freeze the page. */
const REQUEST_MS = 10000;
/** The agent sends a heartbeat every 10 s: a stream silent for this long is dead, and is opened again. */
const STREAM_SILENCE_MS = 30000;
const MAX_FEED = 200;
const MAX_TASK_EVENTS = 4;

const $ = (id) => document.getElementById(id);

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

class AuthError extends Error {}

/** The API answered `status` (not a token's refusal). */
class StatusError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/** A token a header can carry: printable ASCII, no spaces (what `csiplug acl` tokens are). */
const USABLE_TOKEN = /^[\x21-\x7e]+$/;

/** GET `path` (relative to /v1/, so the page also works behind a proxy's path prefix). */
async function api(path, init = {}) {
  const headers = new Headers();
  try {
    if (token()) headers.set(TOKEN_HEADER, token());
  } catch {
    throw new AuthError('the stored token cannot be sent in a header');
  }
  const signal = init.signal || AbortSignal.timeout(REQUEST_MS);
  const res = await fetch(`..${path}`, { headers, signal, cache: 'no-store' });
  if (!res.ok) {
    // The API answers errors as plain text, as Nomad does.
    const message = (await res.text().catch(() => '')).trim();
    // Only the token's own refusals ask for a token; the API's other 403s (its front-door checks) are errors to show.
    if (res.status === 403 && /ACL token/.test(message)) throw new AuthError(message);
    throw new StatusError(`${path}: ${message || res.status}`, res.status);
  }
  return res;
}

const getJson = async (path) => (await api(path)).json();

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  if (props.className) node.className = props.className;
  if (props.title) node.title = props.title;
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function fillTable(id, rows, emptyText, columns) {
  const body = $(id).tBodies[0];
  body.replaceChildren();
  if (rows.length === 0) {
    body.append(el('tr', {}, Object.assign(el('td', { className: 'empty' }, emptyText), { colSpan: columns })));
    return;
  }
  for (const cells of rows) body.append(el('tr', {}, ...cells.map((c) => (c instanceof Node && c.tagName === 'TD' ? c : el('td', {}, c)))));
}

function time(ms) {
  return ms ? new Date(ms).toLocaleTimeString() : '';
}

function bytes(n) {
  if (typeof n !== 'number') return '?';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

/** What a plugin's instances (Nomad's CSIInfo: ControllerInfo, NodeInfo) say they support, without the "Supports". */
function capabilities(p) {
  const names = new Set();
  for (const info of [...Object.values(p.Controllers || {}), ...Object.values(p.Nodes || {})]) {
    for (const part of [info.ControllerInfo, info.NodeInfo]) {
      for (const [k, v] of Object.entries(part || {})) if (v === true) names.add(k.replace(/^Supports/, ''));
    }
  }
  return [...names].join(', ');
}

function pluginHealth(p) {
  const healthy = p.ControllersHealthy + p.NodesHealthy;
  const expected = p.ControllersExpected + p.NodesExpected;
  const ok = expected > 0 && healthy === expected;
  return el('span', { className: ok ? 'healthy' : 'unhealthy' }, ok ? 'healthy' : 'unhealthy');
}

let usageByVolume = new Map();
let usageReadAt = 0;
let usageReading = false;

/** A volume's claims as csiplug's `Csiplug` of its CSIVolumeListStub holds them, writers first. */
function claimsOf(v) {
  const claims = (v.Csiplug && v.Csiplug.claims) || [];
  return [...claims.filter((c) => c.mode === 'write'), ...claims.filter((c) => c.mode !== 'write')];
}

/** The access modes the volume was registered with (its capabilities, in `Csiplug`). */
function accessModesOf(v) {
  return ((v.Csiplug && v.Csiplug.capabilities) || []).map((c) => c.accessMode);
}

/** Every volume in one request (CSIVolumeListStub with `Csiplug`): a failed read fails the refresh as the other reads do, never a silently missing row. */
function readVolumes() {
  return getJson('/v1/volumes?type=csi');
}

/** Reads the usage of every claimed volume, apart from the tables (a slow plugin delays only this column). */
async function readUsage(volumes) {
  if (usageReading || Date.now() - usageReadAt < USAGE_MS) return;
  usageReading = true;
  try {
    const next = new Map();
    await Promise.all(
      volumes
        .filter((v) => claimsOf(v).length > 0)
        .map(async (v) => {
          try {
            next.set(v.ID, await getJson(`/v1/volume/csi/${encodeURIComponent(v.ID)}/usage`));
          } catch (err) {
            if (err instanceof AuthError) throw err;
            next.set(v.ID, [{ error: err.message }]);
          }
        }),
    );
    // Only what is claimed now: a volume whose claims went shows no old figure.
    usageByVolume = next;
    usageReadAt = Date.now();
    scheduleRefresh(0);
  } catch (err) {
    if (err instanceof AuthError) askToken(err.message);
  } finally {
    usageReading = false;
  }
}

function usageText(v) {
  // A volume with no claim has no mount to measure: no old figure stays beside it.
  if (claimsOf(v).length === 0) return '';
  const mounts = usageByVolume.get(v.ID);
  if (!mounts || mounts.length === 0) return '';
  const m = mounts[0];
  if (m.error) return `unknown: ${m.error}`;
  const b = m.usage && m.usage.bytes;
  return b ? `${bytes(b.used)} of ${bytes(b.total)}` : '';
}

// An alloc as Nomad's AllocationListStub: each task's TaskState carries its TaskEvents (Time in Unix nanoseconds).
function allocEvents(a) {
  const all = [];
  for (const [task, state] of Object.entries(a.TaskStates || {}))
    for (const e of state.Events || []) all.push({ task, type: e.Type, message: e.DisplayMessage, time: e.Time / 1e6 });
  all.sort((x, y) => x.time - y.time);
  const list = el('ul', { className: 'task-events' });
  for (const e of all.slice(-MAX_TASK_EVENTS))
    list.append(el('li', { title: e.message }, `${time(e.time)} ${e.task}: ${e.type}${e.message ? ` — ${e.message}` : ''}`));
  return list;
}

/** Every plugin in full (Nomad's CSIPlugin): the list has stubs, each is then read on its own. */
/** Every plugin; one gone between the list and its read (404: its last instance stopped) is skipped. */
async function readPlugins() {
  const stubs = await getJson('/v1/plugins?type=csi');
  const plugins = await Promise.all(
    stubs.map((s) =>
      getJson(`/v1/plugin/csi/${encodeURIComponent(s.ID)}`).catch((err) => {
        if (err instanceof StatusError && err.status === 404) return undefined;
        throw err;
      }),
    ),
  );
  return plugins.filter((p) => p !== undefined);
}

async function refresh() {
  const [node, plugins, volumes, allocs] = await Promise.all([
    getJson('/v1/node/self'),
    readPlugins(),
    readVolumes(),
    getJson('/v1/allocations'),
  ]);
  void readUsage(volumes);
  $('node').textContent = `node ${node.Name} (${node.ID.slice(0, 8)}) · ${node.Status} · version ${node.Csiplug.version}`;
  fillTable(
    'plugins',
    plugins.map((p) => [
      el('code', {}, p.ID),
      p.Provider ? `${p.Provider} ${p.Version || ''}` : '',
      `${p.ControllersHealthy}/${p.ControllersExpected}`,
      `${p.NodesHealthy}/${p.NodesExpected}`,
      pluginHealth(p),
      capabilities(p),
    ]),
    'No plugins',
    6,
  );
  fillTable(
    'volumes',
    volumes.map((v) => [
      el('code', {}, v.ID),
      v.Name,
      v.PluginID,
      accessModesOf(v).join(', '),
      v.Schedulable ? 'yes' : 'no',
      claimsOf(v).length
        ? claimsOf(v)
            .map((c) => `${c.mode} by ${c.allocId.slice(0, 8)}`)
            .join(', ')
        : 'none',
      usageText(v),
    ]),
    'No volumes',
    7,
  );
  fillTable(
    'allocs',
    [...allocs]
      .sort((a, b) => a.Name.localeCompare(b.Name))
      .map((a) => [
        el('code', { title: a.ID }, a.ID.slice(0, 8)),
        a.JobID,
        a.TaskGroup,
        a.DesiredStatus,
        el('span', { className: `status ${a.ClientStatus}` }, a.ClientStatus),
        allocEvents(a),
      ]),
    'No allocations',
    6,
  );
  // Each alloc's row carries its full id, for whoever needs to find it (the browser test does).
  for (const row of $('allocs').tBodies[0].rows) row.dataset.alloc = row.cells[0].querySelector('code')?.title || '';
}

let refreshTimer;
let dueAt = Infinity;
let lastStart = 0;
let refreshing = false;
let again = false;
/** No token yet (or a refused one), or the tab is hidden: nothing is read until that changes. */
let paused = false;

/** Reads everything again in `ms` (or sooner, if a read is due sooner); at most one read a second. */
function scheduleRefresh(ms = 250) {
  if (paused) return;
  if (refreshing) {
    again = true;
    return;
  }
  const at = Math.max(Date.now() + ms, lastStart + MIN_GAP_MS);
  if (at >= dueAt) return;
  clearTimeout(refreshTimer);
  dueAt = at;
  refreshTimer = setTimeout(runRefresh, at - Date.now());
}

function cancelRefresh() {
  clearTimeout(refreshTimer);
  dueAt = Infinity;
  again = false;
}

async function runRefresh() {
  dueAt = Infinity;
  if (paused) return;
  refreshing = true;
  lastStart = Date.now();
  try {
    await refresh();
    showError('');
  } catch (err) {
    if (err instanceof AuthError) return askToken(err.message);
    showError(`Could not read the agent: ${err.message}`);
  } finally {
    refreshing = false;
    if (!paused) {
      const soon = again;
      again = false;
      scheduleRefresh(soon ? 0 : REFRESH_MS);
    }
  }
}

function showError(text) {
  $('error').hidden = !text;
  $('error').textContent = text;
}

/** One of Nomad's events (its time and words in Csiplug). */
function addFeed(e) {
  const feed = $('events');
  $('events-empty').hidden = true;
  const what = [e.Topic, e.Type].filter(Boolean).join(' · ');
  const extras = e.Csiplug || {};
  feed.prepend(el('li', {}, `${time(extras.time)} ${what}: ${extras.message || ''}`));
  while (feed.children.length > MAX_FEED) feed.lastChild.remove();
}

let feedAbort;

/** Follows /v1/event/stream (newline-delimited Nomad Events envelopes) and opens it again after a break or a silence. */
async function follow() {
  if (feedAbort) feedAbort.abort();
  const abort = new AbortController();
  feedAbort = abort;
  for (let delay = 500; !abort.signal.aborted; delay = Math.min(delay * 2, 10000)) {
    const attempt = new AbortController();
    const stop = () => attempt.abort();
    abort.signal.addEventListener('abort', stop);
    let silence;
    const heard = () => {
      clearTimeout(silence);
      silence = setTimeout(stop, STREAM_SILENCE_MS);
    };
    try {
      heard();
      const res = await api('/v1/event/stream', { signal: attempt.signal });
      setLive(true);
      delay = 500;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffered = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        heard();
        buffered += value;
        let nl;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (!line) continue;
          const events = JSON.parse(line).Events;
          if (!events) continue; // a heartbeat
          for (const e of events) addFeed(e);
          scheduleRefresh();
        }
      }
    } catch (err) {
      if (abort.signal.aborted) return;
      if (err instanceof AuthError) return askToken(err.message);
    } finally {
      clearTimeout(silence);
      abort.signal.removeEventListener('abort', stop);
    }
    if (abort.signal.aborted) return;
    setLive(false);
    await new Promise((r) => {
      const t = setTimeout(r, delay);
      abort.signal.addEventListener('abort', () => (clearTimeout(t), r()), { once: true });
    });
    if (abort.signal.aborted) return;
    scheduleRefresh(0);
  }
}

function setLive(on, offText = 'reconnecting') {
  $('live').className = `badge ${on ? 'on' : 'off'}`;
  $('live').textContent = on ? 'feed: live' : `feed: ${offText}`;
}

function stopReading() {
  paused = true;
  cancelRefresh();
  if (feedAbort) feedAbort.abort();
  feedAbort = undefined;
}

function askToken(message) {
  stopReading();
  setLive(false, 'off');
  $('login').hidden = false;
  $('status').hidden = true;
  $('login-error').textContent = token() ? message : '';
  $('token').focus();
}

$('login').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const given = $('token').value.trim();
  if (!USABLE_TOKEN.test(given)) {
    $('login-error').textContent = 'A token is printable ASCII without spaces; check what was pasted.';
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, given);
  $('token').value = '';
  $('login').hidden = true;
  $('status').hidden = false;
  start();
});

$('forget').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  askToken('');
});

// A hidden tab reads nothing (each open stream holds one of the browser's few connections to the agent).
document.addEventListener('visibilitychange', () => {
  if (document.hidden) stopReading();
  else if ($('login').hidden) start();
});

function start() {
  paused = false;
  scheduleRefresh(0);
  void follow();
}

start();
