//! Tournaments in the simulation (docs/tournaments.md): cups defined, joined, played, ended
//! early and deleted through the `ingest` routes, ended on the archive's run, and after every
//! step each cup's view, top and results read through the `seasons` function (its catalog read
//! on every request) and compared with the model (`model::cups`).

use axum::Router;
use axum::http::{Method, StatusCode};
use chrono::{DateTime, SecondsFormat};
use serde_json::{Value, json};

use super::model::cups::{ATTEMPTS, Answer, CupEdit, Defined, Play, SEATS, Schedule, prize, prizes};
use super::world::{World, restoring};
use crate::runtime::call_on;
use crate::{ADMIN, Caller, WRITER, clock_of, read_router};

/// The zone a `cron` cup of `hours` runs its schedule in: UTC (no `timezone`), or one of two
/// zones without clock changes whose offsets are not whole hours (+05:30, +05:45), so a
/// schedule read in UTC fires in another minute than the zone's.
fn zone_of(hours: u8) -> Option<chrono_tz::Tz> {
    match hours {
        1 => None,
        3 => Some(chrono_tz::Asia::Kolkata),
        _ => Some(chrono_tz::Asia::Kathmandu),
    }
}

/// The instant `at` on a clock `offset` seconds east of UTC, as `format` writes it.
fn local(at: i64, offset: i64, format: &str) -> String {
    DateTime::from_timestamp(at + offset, 0).expect("a time the world keeps").format(format).to_string()
}

fn time(at: i64) -> String {
    DateTime::from_timestamp(at, 0).expect("a time in range").to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A tournament route's answer as the model states it.
fn answer(status: StatusCode, reply: &Value) -> Answer {
    if status != StatusCode::OK {
        let code = reply["error"]["code"].as_str().unwrap_or("?").to_owned();
        return Answer::Refused { status: status.as_u16(), code };
    }
    if reply["duplicate"] == true {
        return Answer::Again { applied: reply["applied"] == true };
    }
    if reply.get("size").is_some() && reply.get("event_id").is_none() {
        return Answer::Joined { size: reply["size"].as_u64().unwrap_or(0) as usize };
    }
    Answer::Played {
        applied: reply["applied"] == true,
        score: reply["score"].as_i64().unwrap_or(-1),
        rank: reply["rank"].as_u64().unwrap_or(0) as usize,
        entries_left: reply["entries_left"].as_u64().unwrap_or(99) as u32,
    }
}

async fn read(reads: &Router, path: String) -> (StatusCode, Value) {
    call_on(reads, Method::GET, &path, &Value::Null, Caller::Anonymous).await
}

impl World {
    /// The read functions as a request after a catalog change finds them (catalog read on every
    /// request), over the world's app, table and clock.
    pub(super) fn reads(&self) -> Router {
        let app = &self.app;
        let mut query = query::App::new(app.config.clone(), app.keys.clone(), app.store.clone(), clock_of(&app.now));
        query.catalog = query.catalog.with_refresh(std::time::Duration::ZERO);
        let mut seasons =
            seasons::App::new(app.config.clone(), app.keys.clone(), app.store.clone(), Some(self.table.clone()), clock_of(&app.now));
        seasons.catalog = seasons.catalog.with_refresh(std::time::Duration::ZERO);
        read_router(query, seasons)
    }

    /// Cup 2 recurs (docs/tournaments.md#schedules): an instance every hour on its zone's clock
    /// (`cron`), half an hour long, or every local midnight (`reset: day`, 30-hour windows), six
    /// hours long, each with its own seats, attempts, board and results. Odd cups are `cron`
    /// tournaments whose schedule fires once a year, in the minute their window starts on their
    /// zone's clock (`zone_of`), with instances as long as any: each runs its window as a
    /// one-off would, through the cron path (its instance named by that local minute). Others
    /// are one-offs (`all`).
    fn definition(&self, cup: u8, join: bool, hours: u8, back: u8) -> (Value, Option<Schedule>, String) {
        let start = self.now() - i64::from(back) * 3_600;
        let mut body = json!({
            "title": "Simulated cup", "keep": "best", "order": "desc",
            "start": time(start), "end": time(start + i64::from(hours) * 3_600),
            "max_size": SEATS, "max_entries": ATTEMPTS, "join_required": join,
            "prizes": prizes(0),
        });
        let zone = zone_of(hours);
        if let Some(zone) = zone {
            body["timezone"] = json!(zone.name());
        }
        let offset = zone.map_or(0, |zone| {
            use chrono::Offset;
            let at = DateTime::from_timestamp(start, 0).expect("a time the world keeps").naive_utc();
            i64::from(chrono::TimeZone::offset_from_utc_datetime(&zone, &at).fix().local_minus_utc())
        });
        if cup == 2 {
            let daily = hours == 30;
            let schedule =
                Schedule { every: if daily { 86_400 } else { 3_600 }, offset, duration: if daily { 6 * 3_600 } else { 1_800 }, daily };
            if daily {
                body["reset"] = json!("day");
            } else {
                body["cron"] = json!("0 * * * *");
            }
            body["duration_secs"] = json!(schedule.duration);
            return (body, Some(schedule), String::new());
        }
        if cup % 2 == 1 {
            let fires = start - start.rem_euclid(60);
            body["cron"] = json!(local(fires, offset, "%M %H %d %m *"));
            body["duration_secs"] = json!(31 * 86_400 + 3 * 3_600);
            return (body, None, local(fires, offset, "%Y-%m-%dT%H%M"));
        }
        body.as_object_mut().expect("an object").remove("timezone");
        (body, None, "all".to_owned())
    }

    pub(super) async fn put_cup(&mut self, cup: u8, join: bool, hours: u8, again: bool, back: u8) -> Result<(), String> {
        let id = format!("cup{cup}");
        let (fresh, schedule, single) = self.definition(cup, join, hours, back);
        let known = self.model.cups.cups.get(&id).filter(|_| again);
        let (body, schedule, single) = match known {
            Some(known) => {
                (serde_json::from_str(&known.definition).expect("a definition the world sent"), known.schedule, known.single.clone())
            }
            None => (fresh, schedule, single),
        };
        let (status, reply) = self.app.call(Method::PUT, &format!("/v1/admin/tournaments/{id}"), body.to_string(), ADMIN).await;
        if self.all_lost && restoring(status, &reply) {
            return Ok(());
        }
        let window = [&body["start"], &body["end"]].map(|at| at.as_str().and_then(|at| at.parse::<chrono::DateTime<chrono::Utc>>().ok()));
        let [Some(start), Some(end)] = window else { return Err(format!("a definition the world sent: {body}")) };
        let defined = Defined {
            definition: &body.to_string(),
            join_required: body["join_required"] == true,
            window: (start.timestamp(), end.timestamp()),
            schedule,
            single,
        };
        let expected = self.model.cups.put(&id, defined, self.now());
        let code_ok = match expected {
            409 => reply["error"]["code"] == "board_exists",
            400 => {
                reply["error"]["code"] == "invalid_tournament" && reply["error"]["message"].as_str().is_some_and(|m| m.starts_with("end"))
            }
            _ => true,
        };
        if status.as_u16() != expected || !code_ok {
            return Err(format!("PUT tournament {id}: expected {expected}, got {status} {reply}"));
        }
        Ok(())
    }

    /// A refusal a lost deployment may give: 503 `board_restoring`, or (a function started
    /// while the catalog is lost knows only the declared boards) 404 `unknown_tournament`.
    fn lost_refusal(&self, status: StatusCode, reply: &Value) -> bool {
        self.all_lost && (restoring(status, reply) || reply["error"]["code"] == "unknown_tournament")
    }

    pub(super) async fn join_cup(&mut self, cup: u8, user: u8) -> Result<(), String> {
        let (id, user) = (format!("cup{cup}"), format!("u{user}"));
        let mut next = self.model.clone();
        let banned = next.banned().contains(&user);
        let expected = next.cups.join(&id, &user, banned, self.now());
        let body = json!({"user_id": user});
        let (status, reply) = self.app.call(Method::POST, &format!("/v1/tournaments/{id}/join"), body.to_string(), WRITER).await;
        if self.lost_refusal(status, &reply) {
            return Ok(());
        }
        let got = answer(status, &reply);
        if got != expected {
            return Err(format!("join {id} as {user}: expected {expected:?}, got {status} {reply}"));
        }
        self.model = next;
        Ok(())
    }

    pub(super) async fn correct_cup(&mut self, cup: u8, user: u8, score: u32) -> Result<(), String> {
        let (id, user) = (format!("cup{cup}"), format!("u{user}"));
        let mut next = self.model.clone();
        let banned = next.banned().contains(&user);
        let expected = next.cups.correct(&id, &user, i64::from(score), banned, self.now());
        let body = json!({"set": score, "reason": "simulated"});
        let path = format!("/v1/admin/boards/{id}/users/{user}/corrections");
        let (status, reply) = self.app.call(Method::POST, &path, body.to_string(), ADMIN).await;
        if self.all_lost && (restoring(status, &reply) || reply["error"]["code"] == "unknown_board") {
            return Ok(());
        }
        let got = (status.as_u16(), reply["error"]["code"].as_str().unwrap_or_default());
        match expected {
            Some(expected) if got != expected => {
                return Err(format!("correct {user} in {id}: expected {expected:?}, got {status} {reply}"));
            }
            None if status.is_success() || status.is_server_error() => {
                return Err(format!("correct {user} in {id} (not defined or deleted): got {status} {reply}"));
            }
            _ => {}
        }
        self.model = next;
        Ok(())
    }

    pub(super) async fn play_cup(&mut self, event: u32, cup: u8, user: u8, score: u32, again: bool) -> Result<(), String> {
        let (id, user, event) = (format!("cup{cup}"), format!("u{user}"), format!("p{event}"));
        let body = json!({"event_id": event, "user_id": user, "score": score});
        for _ in 0..=u8::from(again) {
            let mut next = self.model.clone();
            let banned = next.banned().contains(&user);
            let payload = body.to_string();
            let play = Play { event: &event, payload: &payload, user: &user, score: i64::from(score) };
            let expected = next.cups.play(&id, play, banned, self.now());
            let (status, reply) = self.app.call(Method::POST, &format!("/v1/tournaments/{id}/scores"), body.to_string(), WRITER).await;
            if self.lost_refusal(status, &reply) {
                continue;
            }
            let got = answer(status, &reply);
            if got != expected {
                return Err(format!("score {event} of {user} in {id}: expected {expected:?}, got {status} {reply}"));
            }
            self.model = next;
        }
        Ok(())
    }

    /// A live edit moving the cup's end to `minutes` from now (and its title when `title`, and
    /// `more`).
    pub(super) async fn edit_cup(&mut self, cup: u8, minutes: i16, title: bool, more: Option<CupEdit>) -> Result<(), String> {
        let id = format!("cup{cup}");
        let end = self.now() + i64::from(minutes) * 60;
        let mut patch = json!({"end": time(end)});
        if title {
            patch["title"] = json!("Edited cup");
        }
        let known = self.model.cups.cups.get(&id);
        match more {
            None => {}
            Some(CupEdit::Prizes) => patch["prizes"] = prizes(1),
            Some(CupEdit::Seats(seats)) => patch["max_size"] = json!(seats),
            Some(CupEdit::Description) => patch["description"] = json!(format!("Edited at {}", self.now())),
            // Set, or removed (`null`) when some is set.
            Some(CupEdit::Metadata) => {
                let set = known.is_some_and(|c| c.definition.contains("\"metadata\""));
                patch["metadata"] = if set { Value::Null } else { json!({"tier": cup, "region": "eu"}) };
            }
        }
        let (status, reply) = self.app.call(Method::PATCH, &format!("/v1/admin/tournaments/{id}"), patch.to_string(), ADMIN).await;
        if self.all_lost && (restoring(status, &reply) || reply["error"]["code"] == "unknown_tournament") {
            return Ok(());
        }
        let mut edited: Value = self
            .model
            .cups
            .cups
            .get(&id)
            .map_or(Value::Null, |c| serde_json::from_str(&c.definition).expect("a definition the world sent"));
        for (field, value) in patch.as_object().expect("an object") {
            match value {
                Value::Null => _ = edited.as_object_mut().map(|o| o.remove(field)),
                value => edited[field] = value.clone(),
            }
        }
        let mut next = self.model.clone();
        let expected = next.cups.edit(&id, (end, more), &edited.to_string(), self.now());
        let got = (status.as_u16(), reply["error"]["code"].as_str().unwrap_or_default());
        if got != expected || (status == StatusCode::OK && reply["definition"] != edited) {
            return Err(format!("PATCH {id} {patch}: expected {expected:?} with {edited}, got {status} {reply}"));
        }
        self.model = next;
        Ok(())
    }

    /// An admin grants `user` `add` attempts in the cup (grant id `g{grant}`), then sends the
    /// same grant again when `again` (a duplicate), or the id with another payload (409).
    pub(super) async fn grant_cup(&mut self, cup: u8, user: u8, add: u8, grant: u32, again: Option<bool>) -> Result<(), String> {
        let (id, user, grant) = (format!("cup{cup}"), format!("u{user}"), format!("g{grant}"));
        let body = json!({"user_id": user, "add": add, "reason": "simulated", "grant_id": grant});
        let other = json!({"user_id": user, "add": add + 1, "reason": "simulated", "grant_id": grant});
        let sends = match again {
            None => vec![body],
            Some(true) => vec![body.clone(), body],
            Some(false) => vec![body, other],
        };
        for sent in sends {
            let mut next = self.model.clone();
            let banned = next.banned().contains(&user);
            let add = sent["add"].as_u64().unwrap_or(0) as u32;
            let expected = next.cups.grant(&id, &user, add, (&grant, &sent.to_string()), banned, self.now());
            let path = format!("/v1/admin/tournaments/{id}/attempts");
            let (status, reply) = self.app.call(Method::POST, &path, sent.to_string(), ADMIN).await;
            if self.lost_refusal(status, &reply) {
                continue;
            }
            let got = match status {
                StatusCode::OK => Ok((reply["entries_left"].as_u64().unwrap_or(999) as u32, reply["duplicate"] == true)),
                _ => Err(answer(status, &reply)),
            };
            if got != expected {
                return Err(format!("grant {grant} to {user} in {id}: expected {expected:?}, got {status} {reply}"));
            }
            self.model = next;
        }
        Ok(())
    }

    pub(super) async fn end_cup(&mut self, cup: u8, delete: bool) -> Result<(), String> {
        let id = format!("cup{cup}");
        let (status, reply) = if delete {
            self.app.call(Method::DELETE, &format!("/v1/admin/tournaments/{id}?reason=simulated"), String::new(), ADMIN).await
        } else {
            let path = format!("/v1/admin/tournaments/{id}/end");
            self.app.call(Method::POST, &path, json!({"reason": "simulated"}).to_string(), ADMIN).await
        };
        if self.all_lost && restoring(status, &reply) {
            return Ok(());
        }
        let mut next = self.model.clone();
        let expected = if delete { next.cups.delete(&id, self.now()).map(|_| None) } else { next.cups.end(&id, self.now()).map(Some) };
        let got = match (status, expected.as_ref()) {
            (StatusCode::ACCEPTED, Ok(Some(end))) => reply["ended_at"].as_str().is_some_and(|at| at.starts_with(&time(*end)[..19])),
            (StatusCode::ACCEPTED, Ok(None)) => reply["state"] == "ending",
            (_, Err(refusal)) => answer(status, &reply) == *refusal,
            _ => false,
        };
        if !got {
            return Err(format!("{} {id}: expected {expected:?}, got {status} {reply}", if delete { "DELETE" } else { "end" }));
        }
        self.model = next;
        Ok(())
    }

    /// `GET /v1/tournaments?{query}` page after page (two a page): the last answer and every id
    /// listed.
    async fn walk(&mut self, reads: &Router, query: &str) -> (StatusCode, Value, Vec<String>) {
        let mut listed = Vec::new();
        let mut cursor = String::new();
        loop {
            self.stats.reads += 1;
            let (status, page) = read(reads, format!("/v1/tournaments?limit=2{query}{cursor}")).await;
            let ids: Vec<&str> =
                page["tournaments"].as_array().map(|l| l.iter().filter_map(|t| t["tournament_id"].as_str()).collect()).unwrap_or_default();
            listed.extend(ids.into_iter().map(str::to_owned));
            match page["next_cursor"].as_str() {
                Some(next) if status == StatusCode::OK => cursor = format!("&cursor={next}"),
                _ => return (status, page, listed),
            }
        }
    }

    /// Each cup's view, top and results, as the model says.
    pub(super) async fn check_cups(&mut self) -> Result<(), String> {
        let reads = self.reads();
        let now = self.now();
        // The list: every cup not deleted, in name order, walked two a page; under `ended`, every
        // cup with no instance open nor to come, deleted ones included (being deleted, or their
        // end done: from tombstones).
        let cups = &self.model.cups.cups;
        let all: Vec<String> = cups.iter().filter(|(_, cup)| cup.deleted.is_none()).map(|(id, _)| id.clone()).collect();
        let ended: Vec<String> = cups.iter().filter(|(_, cup)| cup.deleted.is_some() || cup.over(now)).map(|(id, _)| id.clone()).collect();
        for (query, expected) in [("", all), ("&state=ended", ended)] {
            let (status, list, listed) = self.walk(&reads, query).await;
            if !(self.all_lost && restoring(status, &list))
                && (status != StatusCode::OK || listed != expected)
                && !(self.all_lost && listed.is_empty())
            {
                return Err(format!("tournaments listed ({query}): expected {expected:?}, got {status} {list}"));
            }
        }
        for (id, cup) in &self.model.cups.cups {
            let get = |path: String| read(&reads, path);
            // A lost catalog is read as empty by a function that reads it now: its cups unknown.
            let lost = |status: StatusCode, body: &Value| {
                self.all_lost && (restoring(status, body) || body["error"]["code"] == "unknown_tournament")
            };
            if cup.deleted.is_none() {
                self.stats.reads += 2;
                let (status, view) = get(format!("/v1/tournaments/{id}")).await;
                let open = cup.open_at(now).is_some();
                let state = if open {
                    "open"
                } else if cup.next_after(now).is_some() {
                    "upcoming"
                } else {
                    "ended"
                };
                // With no instance to show (an edit's end left none to run): the window's end.
                let shown = cup.shown(now);
                let size = shown.as_ref().map_or(0, |w| cup.run(&w.id).seated.len());
                let expected = json!({"state": state, "end": time(shown.as_ref().map_or(cup.end, |w| w.end)), "size": size,
                    "can_join": open && size < cup.seats});
                let got = json!({"state": view["state"], "end": view["end"], "size": view["size"], "can_join": view["can_join"]});
                if !lost(status, &view) && (status != StatusCode::OK || got != expected) {
                    return Err(format!("tournament {id}: expected {expected}, got {status} {view}"));
                }
                let (status, top) = get(format!("/v1/tournaments/{id}/top?limit=100")).await;
                let listed: Vec<(String, i64)> = top["entries"]
                    .as_array()
                    .map(|e| {
                        e.iter().map(|e| (e["user_id"].as_str().unwrap_or("?").to_owned(), e["score"].as_i64().unwrap_or(-1))).collect()
                    })
                    .unwrap_or_default();
                let expected = cup.current(now).map(|w| cup.run(&w.id).top()).unwrap_or_default();
                if !lost(status, &top) && (status != StatusCode::OK || listed != expected) {
                    return Err(format!("tournament {id} top: expected {expected:?}, got {status} {top}"));
                }
            }
            for (instance, run) in &cup.runs {
                self.stats.reads += 1;
                let (status, results) = get(format!("/v1/tournaments/{id}/results?instance={instance}")).await;
                let expected = run.results.as_ref().map(|(rows, table)| {
                    rows.iter()
                        .enumerate()
                        .map(|(i, (user, score))| json!({"rank": i + 1, "user_id": user, "score": score, "prize": prize(*table, i + 1)}))
                        .collect::<Vec<Value>>()
                });
                let got = match (status, &expected) {
                    (StatusCode::OK, Some(rows)) => {
                        let listed: Vec<Value> = results["results"]
                            .as_array()
                            .map(|r| {
                                r.iter()
                                    .map(|r| json!({"rank": r["rank"], "user_id": r["user_id"], "score": r["score"], "prize": r["prize"]}))
                                    .collect()
                            })
                            .unwrap_or_default();
                        listed == *rows
                    }
                    (StatusCode::NOT_FOUND, None) => results["error"]["code"] == "results_pending",
                    _ => false,
                };
                if !got && !lost(status, &results) {
                    return Err(format!("tournament {id} results of {instance}: expected {expected:?}, got {status} {results}"));
                }
            }
        }
        Ok(())
    }
}
