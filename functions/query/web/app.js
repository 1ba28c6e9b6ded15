// Standings live page. Plain browser JavaScript, no build step, no third-party code.
// Every piece of data reaches the page through textContent or an attribute, never as HTML.
'use strict';

// The page is served at its function's root: `/` behind API Gateway, `/lambda-url/query/`
// under `cargo lambda watch`. API paths hang off the same prefix.
const PREFIX = location.pathname.replace(/\/+$/, '');
const POLL_MS = 5000;
const PERIOD_NAMES = { day: 'Day', week: 'Week', month: 'Month', season: 'Season', all: 'All time' };
const ZONE_NAMES = { promote: 'moves up', stay: 'stays', demote: 'moves down' };

const state = {
  boards: [],
  board: null, // the selected ranked board, cumulative or score (catalog entry)
  period: null,
  at: '',
  user: '',
  resetAt: null, // Date of the shown period's next reset, for the countdown
  seq: { top: 0, user: 0, hot: 0, season: 0, league: 0, distribution: 0, statement: 0, tournaments: 0, tournament: 0 },
  tournament: null, // the tournament whose board the panel shows
  userScore: null, // the found player's score on the shown board, marked in the histogram
};

const $ = (id) => document.getElementById(id);

/** An element with text children (strings become text nodes, never markup). */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === 'class') node.className = value;
    else if (name === 'data') Object.assign(node.dataset, value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error && body.error.code;
  }
}

async function getJson(path) {
  const response = await fetch(PREFIX + path, { headers: { accept: 'application/json' } });
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    // A non-JSON body (e.g. a proxy's error page) is reported by status alone.
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

// Every item of a list that pages (`next_cursor`), a hundred at a time.
async function getAll(path, field) {
  const items = [];
  let cursor = null;
  do {
    const page = await getJson(`${path}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    items.push(...page[field]);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== '' && value !== null && value !== undefined) search.set(name, value);
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

const enc = encodeURIComponent;

function setStatus(text, kind) {
  const status = $('status');
  status.textContent = text;
  status.dataset.kind = kind;
}

function reportFailure(error) {
  if (error instanceof ApiError && error.status === 503) setStatus('Store unavailable, retrying…', 'error');
  else if (error instanceof ApiError) setStatus(`Error ${error.status}: ${error.message}`, 'error');
  else setStatus('Offline, retrying…', 'error');
}

/** "Nickname" (with the user id beside it) or the user id alone. */
function playerCell(entry) {
  const nickname = entry.profile && entry.profile.nickname;
  const cell = el('td', { class: 'name' });
  if (nickname) {
    cell.append(el('span', { class: 'nickname' }, nickname), ' ', el('span', { class: 'user-id' }, entry.user_id));
  } else {
    cell.append(el('span', { class: 'nickname' }, entry.user_id));
  }
  if (entry.profile && entry.profile.title) cell.append(' ', el('span', { class: 'title' }, entry.profile.title));
  return cell;
}

/** Counters some boards add per entry, e.g. `invite_count: 2` → "2 × invite". */
function counts(entry) {
  return Object.keys(entry)
    .filter((name) => name.endsWith('_count'))
    .map((name) => `${entry[name]} × ${name.slice(0, -'_count'.length)}`)
    .join(', ');
}

function standingRow(entry) {
  const score = el('td', { class: 'score' }, entry.score);
  const extra = counts(entry);
  if (extra) score.append(el('span', { class: 'count' }, extra));
  const mine = entry.user_id === state.user ? 'me' : '';
  return el('tr', { class: mine, data: { user: entry.user_id, rank: entry.rank } },
    el('td', { class: `rank rank-${entry.rank}` }, entry.rank), playerCell(entry), score);
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// ---- URL state: ?board=&period=&at=&user= survives reloads and can be shared.

function readLocation() {
  const params = new URLSearchParams(location.search);
  return { board: params.get('board'), period: params.get('period'), at: params.get('at') || '', user: params.get('user') || '' };
}

function writeLocation() {
  const search = query({ board: state.board && state.board.name, period: state.period, at: state.at, user: state.user });
  history.replaceState(null, '', location.pathname + search);
}

// ---- Boards and periods

/** Boards ranked by score: cumulative boards and score boards (hot boards have their panel). */
const ranked = (board) => board.kind !== 'decaying';

function selectBoard(name, period) {
  const board = state.boards.find((b) => b.name === name && ranked(b)) || state.boards.find(ranked);
  state.board = board;
  $('boards-panel').hidden = !board;
  if (!board) return; // a configuration of hot boards only
  const kinds = board.periods.map((p) => p.period);
  state.period = kinds.includes(period) ? period : kinds[0];
  for (const tab of $('board-tabs').children) tab.setAttribute('aria-pressed', String(tab.dataset.board === board.name));
  fill($('period-switch'), kinds.map((kind) => el('button', {
    type: 'button', class: 'period', data: { period: kind }, 'aria-pressed': String(kind === state.period),
  }, PERIOD_NAMES[kind] || kind)));
  // A date only picks a period on boards that reset.
  $('at').disabled = kinds.every((kind) => kind === 'all');
}

function selectPeriod(kind) {
  state.period = kind;
  for (const button of $('period-switch').children) button.setAttribute('aria-pressed', String(button.dataset.period === kind));
}

function describePeriod(page) {
  const name = PERIOD_NAMES[page.period] || page.period;
  const info = $('period-info');
  info.replaceChildren(el('strong', { id: 'period-id', data: { period: page.period } }, page.period === 'all' ? name : `${name} ${page.period_id}`),
    ` · ${page.total} ${page.total === 1 ? 'player' : 'players'}`);
  // A score board where lower is better (lap times) says so: its top row has the lowest score.
  if (state.board && state.board.order === 'asc') info.append(' · ', el('span', { id: 'order-note' }, 'lower is better'));
  state.resetAt = page.next_reset ? new Date(page.next_reset) : null;
  if (page.next_reset) {
    info.append(' · ', el('span', { id: 'next-reset', data: { at: page.next_reset } }));
  } else {
    info.append(' · never resets');
  }
  tickCountdown();
}

function duration(ms) {
  const minutes = Math.floor(ms / 60000);
  const days = Math.floor(minutes / 1440);
  const hours = Math.floor((minutes % 1440) / 60);
  if (days > 0) return `${days} d ${hours} h`;
  if (hours > 0) return `${hours} h ${minutes % 60} min`;
  return `${minutes % 60} min ${Math.floor(ms / 1000) % 60} s`;
}

function tickCountdown() {
  const target = $('next-reset');
  if (!target || !state.resetAt) return;
  const left = state.resetAt.getTime() - Date.now();
  const when = state.resetAt.toLocaleString();
  target.textContent = left > 0 ? `resets in ${duration(left)} (${when})` : `ended ${when}`;
  target.title = target.dataset.at;
}

async function refreshTop() {
  const board = state.board;
  if (!board) return;
  const seq = ++state.seq.top;
  const page = await getJson(`/v1/boards/${enc(board.name)}/top${query({ period: state.period, at: state.at, limit: board.top })}`);
  if (seq !== state.seq.top) return; // the selection changed while this was in flight
  describePeriod(page);
  const tbody = $('top').tBodies[0];
  fill(tbody, page.entries.map(standingRow));
  tbody.dataset.board = page.board;
  tbody.dataset.period = page.period;
  tbody.dataset.periodId = page.period_id;
  $('top-empty').hidden = page.entries.length > 0;
}

// ---- A player's standing, around-me and past seasons

async function refreshUser() {
  if (!state.user || !state.board) {
    state.userScore = null;
    return;
  }
  const seq = ++state.seq.user;
  const path = `/v1/boards/${enc(state.board.name)}/users/${enc(state.user)}${query({ period: state.period, at: state.at, around: 3 })}`;
  let standing;
  try {
    standing = await getJson(path);
  } catch (error) {
    if (seq !== state.seq.user || !(error instanceof ApiError) || error.status >= 500) throw error;
    showUserRefusal(error);
    return;
  }
  if (seq !== state.seq.user) return;
  $('user-result').hidden = false;
  $('user-result').classList.remove('refused');
  $('user-result').dataset.user = standing.user_id;
  $('user-rank').textContent = standing.rank === null ? '—' : `#${standing.rank}`;
  $('user-score').textContent = standing.score;
  $('user-percentile').textContent = standing.percentile === null ? '—' : `${standing.percentile}%`;
  $('user-note').textContent = standing.rank === null
    ? `${standing.user_id} has no score on ${standing.board} this period.`
    : `${standing.user_id} is ahead of ${standing.percentile}% of the ${standing.total} players on ${standing.board}.`;
  fill($('around').tBodies[0], standing.around.map(standingRow));
  state.userScore = standing.rank === null ? null : standing.score;
}

/** A search the API refused (e.g. an id with characters ids never have): say why. */
function showUserRefusal(error) {
  state.userScore = null;
  $('user-result').hidden = false;
  $('user-result').classList.add('refused');
  $('user-note').textContent = error.message;
  fill($('around').tBodies[0], []);
}

async function loadUserSeasons() {
  const list = $('user-seasons');
  const status = $('user-seasons-status');
  list.replaceChildren();
  try {
    const history = await getJson(`/v1/users/${enc(state.user)}/seasons`);
    const seasons = history.seasons || [];
    status.textContent = seasons.length ? '' : 'No archived seasons yet.';
    fill(list, seasons.map((s) => el('li', {}, `${s.season} · ${s.board}: #${s.rank}, ${s.score} points`)));
  } catch (error) {
    status.textContent = error instanceof ApiError && error.status === 404
      ? 'Archived seasons are not available here.'
      : 'Archived seasons could not be loaded.';
  }
}

// ---- Hot boards (decaying)

async function refreshHot() {
  const name = $('hot-board').value;
  if (!name) return;
  const seq = ++state.seq.hot;
  const status = $('hot-status');
  const tbody = $('hot').tBodies[0];
  try {
    const hot = await getJson(`/v1/hot/${enc(name)}?limit=10`);
    if (seq !== state.seq.hot) return;
    status.textContent = hot.synthesized_at ? `Synthesized ${new Date(hot.synthesized_at).toLocaleTimeString()}` : '';
    if (!hot.entries.length) status.textContent = 'Nothing is hot yet.';
    fill(tbody, hot.entries.map((item) => el('tr', { data: { item: item.item_id } },
      el('td', { class: 'rank' }, item.rank), el('td', { class: 'name' }, item.item_id),
      el('td', { class: 'score' }, Number(item.score).toFixed(1)))));
  } catch (error) {
    if (seq !== state.seq.hot) return;
    fill(tbody, []);
    if (error instanceof ApiError && error.status === 404) {
      status.textContent = 'The hot board is not available on this deployment.';
      status.dataset.state = 'unavailable';
    } else {
      throw error;
    }
  }
}

// ---- Archived seasons

function previousMonth(periodId) {
  const [year, month] = periodId.split('-').map(Number);
  return month === 1 ? `${year - 1}-12` : `${year}-${String(month - 1).padStart(2, '0')}`;
}

async function loadSeason() {
  const board = $('season-board').value;
  const season = $('season').value;
  const status = $('season-status');
  const tbody = $('season-top').tBodies[0];
  if (!board || !season) return;
  const seq = ++state.seq.season;
  status.textContent = 'Loading…';
  try {
    const page = await getJson(`/v1/boards/${enc(board)}/seasons/${enc(season)}/top?limit=10`);
    if (seq !== state.seq.season) return;
    status.textContent = page.entries.length ? `${board}, season ${season}` : `No one scored on ${board} in ${season}.`;
    fill(tbody, page.entries.map(standingRow));
  } catch (error) {
    if (seq !== state.seq.season) return;
    fill(tbody, []);
    status.textContent = error instanceof ApiError && error.status === 404
      ? `Season ${season} of ${board} is not available here.`
      : 'The archive could not be loaded.';
  }
}

// ---- Live refresh

let pollTimer = null;

// panels.js (leagues, statements, the histogram, tournaments) is a file of its own: a response lost
// on the way would leave those functions undefined and every refresh failing on them. Until it has
// loaded, the page asks for it again (one request at a time) and refreshes the rest.
function panelsLoaded() {
  if (typeof refreshTournaments === 'function') return true;
  if (!document.querySelector('script[data-reload]')) {
    const script = el('script', { src: 'assets/panels.js', data: { reload: 'panels' } });
    script.addEventListener('error', () => script.remove());
    document.head.append(script);
  }
  return false;
}

async function refreshLive() {
  clearTimeout(pollTimer);
  try {
    if (!panelsLoaded()) {
      await Promise.all([refreshTop(), refreshUser(), refreshHot()]);
      throw new Error('assets/panels.js has not loaded');
    }
    await Promise.all([refreshTop(), refreshUser(), refreshHot(), refreshTournaments()]);
    await Promise.all([refreshLeague(), refreshStatement(), refreshDistribution()]);
    setStatus(`Live · updated ${new Date().toLocaleTimeString()}`, 'live');
  } catch (error) {
    reportFailure(error);
  } finally {
    if (!document.hidden) pollTimer = setTimeout(refreshLive, POLL_MS);
  }
}

function changed() {
  writeLocation();
  refreshLive();
}

// ---- Start

async function start() {
  try {
    state.boards = await getAll('/v1/boards', 'boards');
  } catch (error) {
    reportFailure(error);
    setTimeout(start, POLL_MS);
    return;
  }
  fill($('board-tabs'), state.boards.filter(ranked).map((b) => el('button', { type: 'button', class: 'tab', data: { board: b.name } }, b.name)));

  const hot = state.boards.filter((b) => b.kind === 'decaying');
  fill($('hot-board'), hot.map((b) => el('option', { value: b.name }, b.name)));
  $('hot-panel').hidden = hot.length === 0;
  $('hot-board').hidden = hot.length < 2;

  const archived = state.boards.filter((b) => b.archive);
  fill($('season-board'), archived.map((b) => el('option', { value: b.name }, b.name)));
  $('season-panel').hidden = archived.length === 0;
  if (archived.length) {
    const current = archived[0].periods.find((p) => p.period === 'season');
    if (current) $('season').value = previousMonth(current.period_id);
    loadSeason();
  }

  const wanted = readLocation();
  selectBoard(wanted.board, wanted.period);
  state.at = wanted.at;
  $('at').value = state.at;
  if (wanted.user) {
    state.user = wanted.user;
    $('user-id').value = wanted.user;
    loadUserSeasons();
  }

  $('board-tabs').addEventListener('click', (event) => {
    const tab = event.target.closest('button[data-board]');
    if (!tab) return;
    selectBoard(tab.dataset.board, state.period);
    changed();
  });
  $('period-switch').addEventListener('click', (event) => {
    const button = event.target.closest('button[data-period]');
    if (!button) return;
    selectPeriod(button.dataset.period);
    changed();
  });
  $('at').addEventListener('change', () => {
    state.at = $('at').value;
    changed();
  });
  $('today').addEventListener('click', () => {
    state.at = '';
    $('at').value = '';
    changed();
  });
  $('search').addEventListener('submit', (event) => {
    event.preventDefault();
    state.user = $('user-id').value.trim();
    loadUserSeasons();
    changed();
  });
  $('hot-board').addEventListener('change', () => refreshHot().catch(reportFailure));
  $('tournaments').addEventListener('click', (event) => {
    const item = event.target.closest('li[data-tournament]');
    if (!item) return;
    state.tournament = item.dataset.tournament;
    if (panelsLoaded()) refreshTournaments().catch(reportFailure);
  });
  $('season-board').addEventListener('change', loadSeason);
  $('season').addEventListener('change', loadSeason);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) refreshLive();
  });
  setInterval(() => {
    tickCountdown();
    if (panelsLoaded()) tickTournaments();
  }, 1000);
  refreshLive();
}

start();
