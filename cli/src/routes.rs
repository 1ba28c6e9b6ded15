//! The commands that are one HTTP route each (docs/api.md): admin writes, runtime boards,
//! tournaments and reads. Ids are percent-encoded into the path; the routes check them.

use reqwest::Method;
use serde_json::{Value, json};

use crate::Failure;
use crate::api::{Api, segment};
use crate::args::{Boards, Command, Tournaments};
use crate::target::Target;

/// The most pages a listing follows (results: 100 rows each; boards, tournaments: 100 a page).
const MAX_PAGES: usize = 1_000;

/// The page size asked of the boards' and tournaments' listings (their most).
const LIST_PAGE: usize = 100;

pub async fn run(target: &Target, command: &Command) -> Result<Value, Failure> {
    let base =
        target.api.as_deref().ok_or_else(|| Failure::Usage("this command calls the HTTP API: give --api URL or --stack NAME".into()))?;
    let api = Api::new(base, target.token.clone())?;
    let opt = |name: &'static str, value: &Option<String>| value.as_ref().map(|v| (name, v.clone()));
    match command {
        Command::Ban { user, .. } => api.call(Method::POST, &format!("/v1/admin/users/{}/ban", segment(user)), &[], None).await,
        Command::Unban { user, .. } => api.call(Method::DELETE, &format!("/v1/admin/users/{}/ban", segment(user)), &[], None).await,
        Command::Correct { board, user, delta, set, reason, period, period_id, correction_id } => {
            // As a void's: the same command again (after a lost answer) is the same correction.
            let amount = format!("{delta:?}/{set:?}/{period:?}/{period_id:?}");
            let correction_id = correction_id.clone().unwrap_or_else(|| derived_id(&[board, user, &amount, reason]));
            let mut body = json!({"reason": reason, "period": period, "period_id": period_id, "correction_id": correction_id});
            match (delta, set) {
                (Some(delta), None) => body["delta"] = json!(delta),
                (None, Some(set)) => body["set"] = json!(set),
                _ => return Err(Failure::Usage("exactly one of --delta and --set".into())),
            }
            let path = format!("/v1/admin/boards/{}/users/{}/corrections", segment(board), segment(user));
            api.call(Method::POST, &path, &[], Some(&body)).await
        }
        Command::Void { board, user, from, to, reason, void_id } => {
            // The same command again is the same void (a retry after a lost answer applies once).
            let void_id = void_id.clone().unwrap_or_else(|| derived_id(&[board, user, from, to, reason]));
            let body = json!({"void_id": void_id, "from": from, "to": to, "reason": reason});
            let path = format!("/v1/admin/boards/{}/users/{}/void", segment(board), segment(user));
            api.call(Method::POST, &path, &[], Some(&body)).await
        }
        Command::Boards(boards) => match boards {
            Boards::List => {
                let query = vec![("limit", LIST_PAGE.to_string())];
                let first = api.call(Method::GET, "/v1/boards", &query, None).await?;
                every_page(&api, "/v1/boards", query, first, "boards").await
            }
            Boards::Show { name } => api.call(Method::GET, &format!("/v1/admin/boards/{}", segment(name)), &[], None).await,
            Boards::Put { name, file } => {
                let body = json_file(file)?;
                api.call(Method::PUT, &format!("/v1/admin/boards/{}", segment(name)), &[], Some(&body)).await
            }
            Boards::Delete { name, reason } => {
                let query: Vec<_> = opt("reason", reason).into_iter().collect();
                api.call(Method::DELETE, &format!("/v1/admin/boards/{}", segment(name)), &query, None).await
            }
        },
        Command::Tournaments(tournaments) => self::tournaments(&api, tournaments).await,
        Command::Top { board, period, limit } => {
            let mut query: Vec<_> = opt("period", period).into_iter().collect();
            query.extend(limit.map(|limit| ("limit", limit.to_string())));
            api.call(Method::GET, &format!("/v1/boards/{}/top", segment(board)), &query, None).await
        }
        Command::Rank { board, user, period } => {
            let query: Vec<_> = opt("period", period).into_iter().collect();
            api.call(Method::GET, &format!("/v1/boards/{}/users/{}", segment(board), segment(user)), &query, None).await
        }
        Command::Statement { board, user } => {
            api.call(Method::GET, &format!("/v1/boards/{}/users/{}/statement", segment(board), segment(user)), &[], None).await
        }
        Command::Audit { board, limit } => {
            let mut query: Vec<_> = opt("board", board).into_iter().collect();
            query.extend(limit.map(|limit| ("limit", limit.to_string())));
            api.call(Method::GET, "/v1/admin/audit", &query, None).await
        }
        _ => unreachable!("the jobs run through jobs::run"),
    }
}

async fn tournaments(api: &Api, command: &Tournaments) -> Result<Value, Failure> {
    let path = |id: &str, tail: &str| format!("/v1/admin/tournaments/{}{tail}", segment(id));
    match command {
        Tournaments::List { state, category } => {
            let query: Vec<_> = [("state", state), ("category", category)]
                .into_iter()
                .filter_map(|(name, value)| value.as_ref().map(|v| (name, v.clone())))
                .chain([("limit", LIST_PAGE.to_string())])
                .collect();
            let first = api.call(Method::GET, "/v1/tournaments", &query, None).await?;
            every_page(api, "/v1/tournaments", query, first, "tournaments").await
        }
        Tournaments::Show { id } => api.call(Method::GET, &format!("/v1/tournaments/{}", segment(id)), &[], None).await,
        Tournaments::Put { id, file } => api.call(Method::PUT, &path(id, ""), &[], Some(&json_file(file)?)).await,
        Tournaments::Patch { id, file } => api.call(Method::PATCH, &path(id, ""), &[], Some(&json_file(file)?)).await,
        Tournaments::Grant { id, user, add, reason, grant_id } => {
            // As a correction's: the same command again (after a lost answer) is the same grant.
            let grant_id = grant_id.clone().unwrap_or_else(|| derived_id(&[id, user, &add.to_string(), reason]));
            let body = json!({"user_id": user, "add": add, "reason": reason, "grant_id": grant_id});
            api.call(Method::POST, &path(id, "/attempts"), &[], Some(&body)).await
        }
        Tournaments::End { id, reason } => api.call(Method::POST, &path(id, "/end"), &[], Some(&json!({"reason": reason}))).await,
        Tournaments::Delete { id, reason } => {
            let query: Vec<_> = reason.iter().map(|r| ("reason", r.clone())).collect();
            api.call(Method::DELETE, &path(id, ""), &query, None).await
        }
        Tournaments::Results { id, instance } => {
            let mut query: Vec<_> = instance.iter().map(|i| ("instance", i.clone())).collect();
            let route = format!("/v1/tournaments/{}/results", segment(id));
            let first = api.call(Method::GET, &route, &query, None).await?;
            // The next pages are the first's instance (the route chose it when none was given).
            query.extend(first["instance"].as_str().filter(|_| instance.is_none()).map(|i| ("instance", i.to_owned())));
            every_page(api, &route, query, first, "results").await
        }
    }
}

/// Every page of a listing, in its order: the `first` page's answer with the `rows` of every
/// page after it (`query` and each page's `next_cursor`). A listing not followed to its end (a
/// page that fails or has no rows, or `MAX_PAGES` of them) is a failure carrying the rows so
/// far, with the cursor of the first page not read as their `next_cursor`.
async fn every_page(api: &Api, route: &str, query: Vec<(&str, String)>, mut first: Value, rows: &str) -> Result<Value, Failure> {
    for _ in 0..MAX_PAGES {
        let Some(next) = first["next_cursor"].as_str().map(str::to_owned) else { break };
        let mut paged = query.clone();
        paged.push(("cursor", next));
        let page = match api.call(Method::GET, route, &paged, None).await {
            Ok(page) => page,
            Err(failure) => return Err(failure.after(Some(first))),
        };
        let (Some(all), Some(more)) = (first[rows].as_array_mut(), page[rows].as_array()) else {
            return Err(Failure::Incomplete { message: format!("GET {route}: a page without `{rows}`: {page}"), summary: Some(first) });
        };
        all.extend(more.iter().cloned());
        first["next_cursor"] = page["next_cursor"].as_str().map_or(Value::Null, |c| Value::String(c.to_owned()));
    }
    if !first["next_cursor"].is_string() {
        return Ok(first);
    }
    Err(Failure::Incomplete { message: format!("GET {route}: more than {MAX_PAGES} pages"), summary: Some(first) })
}

fn json_file(file: &std::path::Path) -> Result<Value, Failure> {
    let text = std::fs::read_to_string(file).map_err(|e| Failure::Usage(format!("{}: {e}", file.display())))?;
    serde_json::from_str(&text).map_err(|e| Failure::Usage(format!("{}: not JSON: {e}", file.display())))
}

/// The exactly-once id of a correction, void or grant sent without one: the same arguments
/// give the same id, so the same command again (after a lost answer) applies once.
fn derived_id(parts: &[&String]) -> String {
    format!("cli-{:016x}", fnv1a(parts))
}

/// FNV-1a over the parts (a separator between them): a stable id for the same arguments.
fn fnv1a(parts: &[&String]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}
