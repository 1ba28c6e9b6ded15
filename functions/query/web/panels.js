// Standings live page: the panels beside a board (a found player's league and statement, the
// board's score distribution). Loaded before app.js, whose helpers ($, el, getJson, state, …)
// these functions use when app.js calls them; like app.js, data reaches the page as text only.
'use strict';

// ---- A player's league (boards with one) and statement (boards that keep them)

/** A found player's panel, or null when the API refused the search (the standing says why). */
async function getUnlessRefused(path) {
  try {
    return await getJson(path);
  } catch (error) {
    if (!(error instanceof ApiError) || error.status >= 500) throw error;
    return null;
  }
}

async function refreshLeague() {
  const board = state.board;
  const panel = $('league-panel');
  if (!state.user || !board || !board.league) {
    panel.hidden = true;
    return;
  }
  const seq = ++state.seq.league;
  const league = await getUnlessRefused(`/v1/boards/${enc(board.name)}/users/${enc(state.user)}/league${query({ at: state.at })}`);
  if (seq !== state.seq.league) return;
  if (!league) {
    panel.hidden = true;
    return;
  }
  panel.hidden = false;
  panel.dataset.tier = league.tier;
  const left = league.next_reset ? ` · ${duration(new Date(league.next_reset).getTime() - Date.now())} left` : '';
  if (league.cohort === null) {
    $('league-status').textContent = league.waiting
      ? `${league.tier} · placed in a cohort once last ${league.period} closes${left}`
      : `${league.tier} · joins a cohort with their first points this ${league.period}${left}`;
  } else {
    $('league-status').textContent = `${league.tier} · cohort ${league.cohort} · ${league.entries.length} players${left}`;
  }
  fill($('league').tBodies[0], league.entries.map((entry) => {
    const row = standingRow(entry);
    row.classList.add(`zone-${entry.zone}`);
    row.dataset.zone = entry.zone;
    row.append(el('td', { class: 'zone' }, ZONE_NAMES[entry.zone] || entry.zone));
    return row;
  }));
}

function statementLine(line) {
  const label = {
    action: () => `${line.action}: ${line.events} × (${line.earned} earned${line.withheld ? `, ${line.withheld} over the daily cap` : ''}${line.taken_back ? `, ${line.taken_back} taken back` : ''})`,
    correction: () => `correction: ${line.reason}`,
    void: () => `void: ${line.reason}`,
    sign_ins: () => `${line.days} sign-ins`,
    streak_bonuses: () => 'streak bonuses',
    kept_score: () => 'kept score',
    submissions: () => `${line.submissions} submissions`,
  }[line.kind];
  return el('tr', { data: { kind: line.kind, points: line.points } },
    el('td', { class: 'name' }, label ? label() : line.kind), el('td', { class: 'score' }, line.points));
}

async function refreshStatement() {
  const board = state.board;
  const panel = $('statement-panel');
  if (!state.user || !board || !board.statements) {
    panel.hidden = true;
    return;
  }
  const seq = ++state.seq.statement;
  const user = state.user;
  const statement = await getUnlessRefused(`/v1/boards/${enc(board.name)}/users/${enc(user)}/statement${query({ period: state.period, at: state.at })}`);
  if (seq !== state.seq.statement) return;
  panel.hidden = !statement;
  if (!statement) return;
  const tbody = $('statement').tBodies[0];
  fill(tbody, statement.lines.map(statementLine));
  // Whose statement the table holds, as the top table says its board: a table filled for the
  // board or player before is not this one's.
  tbody.dataset.board = board.name;
  tbody.dataset.user = user;
  const unexplained = statement.unexplained;
  $('statement-note').textContent = unexplained
    ? `${unexplained.points} points not itemised (${unexplained.reason.replace('_', ' ')}); total ${statement.score}.`
    : statement.score === null ? 'No score on this board.' : `Total ${statement.score}.`;
}

// ---- The board's score distribution

async function refreshDistribution() {
  const board = state.board;
  if (!board) return;
  const seq = ++state.seq.distribution;
  const shape = await getJson(`/v1/boards/${enc(board.name)}/distribution${query({ period: state.period, at: state.at, buckets: 12 })}`);
  if (seq !== state.seq.distribution) return;
  const most = Math.max(1, ...shape.buckets.map((b) => b.count));
  $('distribution-status').textContent = shape.total
    ? `${shape.total} ${shape.total === 1 ? 'player' : 'players'}, ${shape.buckets.length} score ranges`
    : 'No scores yet.';
  fill($('histogram'), shape.buckets.map((bucket) => {
    const mine = state.userScore !== null && state.userScore >= bucket.min && state.userScore <= bucket.max;
    const bucketBar = el('div', {
      class: mine ? 'bucket mine' : 'bucket',
      title: `${bucket.min}–${bucket.max}: ${bucket.count}`, data: { min: bucket.min, max: bucket.max, count: bucket.count },
    });
    // Through CSSOM, not a style attribute: the page's Content-Security-Policy allows no inline style.
    bucketBar.style.height = `${Math.round((100 * bucket.count) / most)}%`;
    return bucketBar;
  }));
  fill($('cutoffs'), shape.cutoffs.map((c) => el('li', { data: { top: c.top_percent, score: c.score } }, `top ${c.top_percent}%: ${c.score}`)));
}

// ---- Tournaments: the open and upcoming ones with a countdown, and a chosen one's board

/** "ends in 2 h 5 min" for an open tournament, "starts in …" for an upcoming one. */
function tournamentCountdown(item) {
  const open = item.dataset.state === 'open';
  const left = new Date(open ? item.dataset.end : item.dataset.start).getTime() - Date.now();
  return left > 0 ? `${open ? 'ends' : 'starts'} in ${duration(left)}` : (open ? 'ended' : 'starting');
}

function tickTournaments() {
  for (const countdown of document.querySelectorAll('#tournaments .countdown')) {
    countdown.textContent = tournamentCountdown(countdown.closest('li'));
  }
}

async function refreshTournaments() {
  const seq = ++state.seq.tournaments;
  let pages;
  try {
    // The first page of open ones, then of upcoming ones: the panel shows at most forty.
    pages = await Promise.all(['open', 'upcoming'].map((s) => getJson(`/v1/tournaments?state=${s}&limit=20`)));
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return; // not on this deployment
    throw error;
  }
  if (seq !== state.seq.tournaments) return;
  const shown = pages.flatMap((page) => page.tournaments);
  $('tournaments-panel').hidden = shown.length === 0;
  fill($('tournaments'), shown.map((t) => {
    const item = el('li', { data: { tournament: t.tournament_id, state: t.state, start: t.start, end: t.end } },
      el('button', { type: 'button', class: 'link' }, t.title), ' ',
      el('span', { class: `badge ${t.state}` }, t.state), ' ',
      el('span', { class: 'countdown muted' }), ' ',
      el('span', { class: 'size muted' }, t.max_size ? `${t.size}/${t.max_size} players` : `${t.size} players`));
    if (t.tournament_id === state.tournament) item.classList.add('chosen');
    return item;
  }));
  tickTournaments();
  if (!state.tournament && shown.length) state.tournament = shown[0].tournament_id;
  await refreshTournament(shown.find((t) => t.tournament_id === state.tournament));
}

async function refreshTournament(tournament) {
  const panel = $('tournament-board');
  if (!tournament) {
    panel.hidden = true;
    return;
  }
  const seq = ++state.seq.tournament;
  const top = await getJson(`/v1/tournaments/${enc(tournament.tournament_id)}/top?limit=10`);
  if (seq !== state.seq.tournament) return;
  panel.hidden = false;
  panel.dataset.tournament = tournament.tournament_id;
  $('tournament-name').textContent = tournament.title;
  $('tournament-status').textContent = top.total ? `${top.total} ${top.total === 1 ? 'player' : 'players'} scored` : 'No scores yet.';
  fill($('tournament-top').tBodies[0], top.entries.map((entry) => {
    const row = standingRow(entry);
    const prize = entry.prize === null ? '' : (typeof entry.prize === 'string' ? entry.prize : JSON.stringify(entry.prize));
    row.append(el('td', { class: 'prize' }, prize));
    return row;
  }));
}
