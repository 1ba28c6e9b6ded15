//! Boards created at runtime (docs/runtime-boards.md): a definition is a `[[boards]]` entry
//! written as JSON and validated as one, named by its route.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::tournament::{Tournament, TournamentError};
use super::validate::{invalid, validate_board};
use super::*;

/// The key of a stored definition that makes the board a tournament's (docs/tournaments.md).
const TOURNAMENT: &str = "tournament";
/// The key of a tournament's definition that records instances ended early: instance id ->
/// `{at, reason}`.
pub const CLOSED: &str = "closed";
/// When a stored tournament was defined (`Tournament::defined`).
const DEFINED_AT: &str = "defined_at";
/// The window (seconds) a tournament's scale was made for, once a live edit moved its end
/// (`Tournament::scale_window`).
pub const SCALE_SECS: &str = "scale_secs";
/// Prizes a live edit replaced, kept for the instances ended before it (`Tournament::prior_prizes`).
pub const PRIOR_PRIZES: &str = "prior_prizes";

/// How many runtime boards a deployment holds unless `STANDINGS_MAX_RUNTIME_BOARDS` says.
pub const MAX_RUNTIME_BOARDS: u32 = 10_000;
/// The largest definition a runtime board or tournament is given (its JSON body): every warm
/// function holds every definition, so the catalog stays within `MAX_RUNTIME_BOARDS` times this.
/// Checked when defined, not when loaded: a definition stored before the limit is still served.
pub const MAX_DEFINITION_BYTES: usize = 16 * 1024;
/// The most rules a runtime board is given.
pub const MAX_RULES: usize = 100;

/// `Some(problem)` when `body` passes `MAX_DEFINITION_BYTES`.
fn oversized(body: &Value) -> Option<String> {
    let bytes = body.to_string().len();
    (bytes > MAX_DEFINITION_BYTES).then(|| format!("a definition is at most {MAX_DEFINITION_BYTES} bytes of JSON ({bytes} given)"))
}

/// A runtime board: its definition as stored (canonical JSON, keys sorted, so the same
/// definition sent again is recognised whatever its key order) and the board it defines.
#[derive(Debug, Clone)]
pub struct Definition {
    pub text: String,
    pub board: Board,
}

impl Definition {
    /// The definition `body` of board `name`. Errors name the body's field (`top`,
    /// `rules[0].points`); `name` in the body may be left out, or must be the route's.
    pub fn parse(name: &str, body: &Value) -> Result<Self, ConfigError> {
        if ids::validate_board_name(name).is_err() {
            return Err(invalid("board", "must be 1-32 characters of a-z, 0-9 and '-'"));
        }
        let Some(object) = body.as_object() else {
            return Err(invalid("body", "a board definition is a JSON object"));
        };
        if let Some(problem) = oversized(body) {
            return Err(invalid("body", problem));
        }
        if object.get("rules").and_then(Value::as_array).is_some_and(|rules| rules.len() > MAX_RULES) {
            return Err(invalid("rules", format!("at most {MAX_RULES}")));
        }
        let mut object: Map<String, Value> = object.clone();
        if object.contains_key(TOURNAMENT) {
            return Err(invalid(TOURNAMENT, "a tournament is defined at /v1/admin/tournaments/{tournament_id}"));
        }
        match object.get("name") {
            None => {
                object.insert("name".into(), Value::String(name.to_owned()));
            }
            Some(Value::String(given)) if given == name => {}
            Some(_) => return Err(invalid("name", "must be the board named in the path (or left out)")),
        }
        let text = Value::Object(object).to_string();
        let board = Self::stored(&text)?;
        Ok(Self { text, board })
    }

    /// The tournament `id` defined by `body` (`PUT /v1/admin/tournaments/{id}`) at `now`: stored
    /// beside the runtime boards, as the score board that holds its instances, with when it was
    /// defined (no instance ended by then ever ran).
    pub fn tournament(id: &str, body: &Value, now: DateTime<Utc>) -> Result<Self, TournamentError> {
        Tournament::parse(id, body)?;
        if let Some(problem) = oversized(body) {
            return Err(TournamentError { field: "body".into(), problem });
        }
        let defined = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let text = json!({"name": id, TOURNAMENT: body, DEFINED_AT: defined}).to_string();
        let board = Self::stored(&text).map_err(|error| TournamentError { field: "body".into(), problem: error.to_string() })?;
        Ok(Self { text, board })
    }

    /// The board a stored definition defines (checked again: a release may refuse what an
    /// older one took).
    pub fn stored(text: &str) -> Result<Board, ConfigError> {
        if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text)
            && let (Some(Value::String(name)), Some(body)) = (object.get("name"), object.get(TOURNAMENT))
        {
            return tournament_board(name, body, &object);
        }
        // The path of a field that does not parse (`rules[0].points`), not a column of the text.
        let raw: RawBoard = serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text)).map_err(|error| {
            let field = error.path().to_string();
            let problem = error.into_inner().to_string();
            match field.as_str() {
                "." | "" => ConfigError::Definition(problem),
                _ => invalid(field, problem.split(" at line ").next().unwrap_or(&problem)),
            }
        })?;
        let refusal = match raw.kind {
            BoardKind::Decaying => Some(("kind", "a hot (decaying) board is declared in the configuration file, not at runtime")),
            _ if raw.sign_in.is_some() => Some(("sign_in", "sign-ins have one board, declared in the configuration file")),
            _ if raw.league.is_some() => Some(("league", "a league board is declared in the configuration file, not at runtime")),
            _ if raw.notify.is_some() => Some(("notify", "notifications are declared in the configuration file, not at runtime")),
            _ => None,
        };
        if let Some((field, problem)) = refusal {
            return Err(invalid(field, problem));
        }
        let mut board = validate_board("board", raw).map_err(|error| match error {
            ConfigError::Invalid { field, problem } => {
                let field = field.strip_prefix("board.").unwrap_or(&field).to_owned();
                ConfigError::Invalid { field, problem }
            }
            other => other,
        })?;
        board.runtime = true;
        Ok(board)
    }
}

/// The field of a deleted board's record in the catalog's `ending` hash that keeps its
/// `tombstone` once its end is done.
pub const KEPT_DEFINITION: &str = "definition";

/// The board the record `why` of a deleted board keeps (`None`: none kept, or unreadable).
pub fn kept_board(why: &Value) -> Option<Board> {
    Definition::stored(&why.get(KEPT_DEFINITION)?.to_string()).ok()
}

/// What a deleted board's tombstone keeps of its stored definition (docs/runtime-boards.md):
/// what its history is read through (its archived seasons' periods, timezone and order, and
/// its rules, which name a one-rule board's `<action>_count` in their rows; a tournament's
/// schedule, ended instances and prizes, which its results show), not what only its listing
/// and its end events read (a tournament's description and metadata, sent before it is
/// retired).
pub fn tombstone(mut definition: Value) -> Value {
    if let Some(body) = definition.get_mut(TOURNAMENT).and_then(Value::as_object_mut) {
        body.remove("description");
        body.remove("metadata");
    }
    definition
}

/// The score board of tournament `id`: one period, the instance's (in its timezone), and a score range
/// whose composite keeps every second of the window for first-to-reach ties.
fn tournament_board(id: &str, body: &Value, stored: &Map<String, Value>) -> Result<Board, ConfigError> {
    let mut tournament = Tournament::parse(id, body).map_err(|error| invalid(format!("tournament.{}", error.field), error.problem))?;
    if let Some(secs) = stored.get(SCALE_SECS) {
        let secs = secs.as_i64().filter(|secs| *secs > 0).ok_or_else(|| invalid(SCALE_SECS, "a number of seconds"))?;
        tournament.scale_window = Some(chrono::Duration::seconds(secs));
    }
    if let Some(prior) = stored.get(PRIOR_PRIZES) {
        tournament.prior_prizes = serde_json::from_value(prior.clone()).map_err(|error| invalid(PRIOR_PRIZES, error.to_string()))?;
    }
    let closed = stored.get(CLOSED);
    if let Some(defined) = stored.get(DEFINED_AT) {
        let at = defined.as_str().and_then(|at| at.parse().ok());
        tournament.defined = Some(at.ok_or_else(|| invalid(DEFINED_AT, "an RFC 3339 time"))?);
    }
    for (instance, why) in closed.and_then(Value::as_object).into_iter().flatten() {
        let at = why["at"].as_str().and_then(|at| at.parse().ok());
        let at = at.ok_or_else(|| invalid(format!("{CLOSED}.{instance}.at"), "an RFC 3339 time"))?;
        tournament.closed.insert(instance.clone(), at);
    }
    let kind = tournament.period_kind();
    // A board definition names no cron period (its schedule is the tournament's): validated as
    // all-time, then given the tournament's own kind.
    let named = if matches!(kind, PeriodKind::Cron(_)) { PeriodKind::All } else { kind };
    let raw = json!({
        "name": id, "kind": "scores", "keep": tournament.keep, "order": tournament.order, "timezone": tournament.timezone.name(),
        "periods": [named.as_str()], "top": 1000, "max_score": tournament.max_score(),
    });
    let raw: RawBoard = serde_json::from_value(raw).map_err(|error| ConfigError::Definition(error.to_string()))?;
    let mut board = validate_board("board", raw)?;
    board.periods = vec![kind];
    board.runtime = true;
    board.tournament = Some(Arc::new(tournament));
    Ok(board)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scores() -> Value {
        json!({"kind": "scores", "timezone": "UTC", "periods": ["week", "all"], "top": 100, "keep": "best"})
    }

    #[test]
    fn a_definition_is_a_board_entry_named_by_its_route_and_stored_with_sorted_keys() {
        let definition = Definition::parse("cup-2027", &scores()).unwrap();
        assert_eq!(definition.board.name, "cup-2027");
        assert!(definition.board.runtime);
        assert_eq!(definition.board.scores.unwrap().keep, Keep::Best);
        let mut named = scores();
        named["name"] = json!("cup-2027");
        let reordered: Value = serde_json::from_str(&named.to_string()).unwrap();
        assert_eq!(Definition::parse("cup-2027", &reordered).unwrap().text, definition.text);
        assert!(definition.text.starts_with("{\"keep\":\"best\",\"kind\":\"scores\",\"name\":\"cup-2027\""), "{}", definition.text);
    }

    /// A tombstone parses to the board its definition made, minus what no read of its history
    /// uses: a tournament's prizes, schedule and window stay, its description and metadata go;
    /// a board's periods and rules stay (an archived season's rows show a one-rule board's
    /// `<action>_count`).
    #[test]
    fn a_tombstone_keeps_what_the_history_reads() {
        let now = "2026-12-01T00:00:00Z".parse().unwrap();
        let body = json!({"title": "Cup", "description": "d".repeat(900), "metadata": {"blob": "m".repeat(3000)}, "keep": "best",
            "start": "2026-12-01T00:00:00Z", "end": "2026-12-08T00:00:00Z", "cron": "0 20 * * *", "duration_secs": 3600,
            "join_required": false, "prizes": [{"ranks": [1, 1], "reward": {"gems": 5}}]});
        let cup = Definition::tournament("cup", &body, now).unwrap();
        let kept = tombstone(serde_json::from_str(&cup.text).unwrap());
        assert!(kept.to_string().len() < cup.text.len() - 3900, "{kept}");
        let retired = Definition::stored(&kept.to_string()).unwrap();
        let (before, after) = (cup.board.tournament.as_deref().unwrap(), retired.tournament.as_deref().unwrap());
        assert_eq!((after.description.as_ref(), after.metadata.as_ref()), (None, None));
        assert_eq!(
            (&after.prizes, after.cron, after.start, after.end, after.defined),
            (&before.prizes, before.cron, before.start, before.end, before.defined)
        );
        assert_eq!((&retired.periods, after.max_score()), (&cup.board.periods, before.max_score()));

        let rules = json!({"kind": "cumulative", "timezone": "Asia/Tokyo", "periods": ["day", "season"], "top": 10, "archive": true,
            "rules": [{"action": "comment", "points": 2, "scope": "none"}]});
        let board = Definition::parse("points", &rules).unwrap();
        let kept = tombstone(serde_json::from_str(&board.text).unwrap());
        let retired = Definition::stored(&kept.to_string()).unwrap();
        assert_eq!(retired.rules, board.board.rules);
        assert_eq!(
            (&retired.periods, retired.timezone, retired.kind, retired.archive),
            (&board.board.periods, board.board.timezone, board.board.kind, true)
        );
    }

    fn field_of(name: &str, body: Value) -> String {
        match Definition::parse(name, &body).unwrap_err() {
            ConfigError::Invalid { field, .. } => field,
            ConfigError::Definition(message) => message,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn each_bad_field_is_named() {
        let mut bad_top = scores();
        bad_top["top"] = json!(0);
        assert_eq!(field_of("cup", bad_top), "top");
        let mut wrong_type = scores();
        wrong_type["top"] = json!("ten");
        assert_eq!(field_of("cup", wrong_type), "top", "a field of the wrong type is named too");
        let mut bad_period = scores();
        bad_period["periods"] = json!(["week", "fortnight"]);
        assert_eq!(field_of("cup", bad_period), "periods[1]");
        let mut other_name = scores();
        other_name["name"] = json!("other");
        assert_eq!(field_of("cup", other_name), "name");
        assert_eq!(field_of("Cup!", scores()), "board");
        assert_eq!(field_of("cup", json!([1])), "body");
        let mut unknown = scores();
        unknown["colour"] = json!("red");
        assert_eq!(field_of("cup", unknown), "colour");
        let mut rules = json!({"kind": "cumulative", "timezone": "UTC", "periods": ["day"], "top": 10,
            "rules": [{"action": "post", "points": 0, "scope": "none"}]});
        assert_eq!(field_of("forum", rules.clone()), "rules[0].points");
        rules["rules"][0]["points"] = json!(5);
        rules["sign_in"] = json!({"points": 1});
        assert_eq!(field_of("forum", rules), "sign_in");
        let mut hot = scores();
        hot["kind"] = json!("decaying");
        assert_eq!(field_of("hot", hot), "kind");
    }

    #[test]
    fn definitions_past_their_size_or_rule_count_are_refused_naming_the_limit() {
        let rule = |i: usize| json!({"action": format!("a{i}"), "points": 1, "scope": "none"});
        let board = |rules: usize| json!({"kind": "cumulative", "timezone": "UTC", "periods": ["day"], "top": 10, "rules": (0..rules).map(rule).collect::<Vec<_>>()});
        assert!(Definition::parse("many", &board(MAX_RULES)).is_ok());
        assert_eq!(field_of("many", board(MAX_RULES + 1)), "rules");
        let mut padded = scores();
        padded["title"] = json!("t".repeat(MAX_DEFINITION_BYTES));
        match Definition::parse("big", &padded).unwrap_err() {
            ConfigError::Invalid { field, problem } => assert!(field == "body" && problem.contains("16384 bytes"), "{field}: {problem}"),
            other => panic!("{other}"),
        }
        let now = "2027-01-01T00:00:00Z".parse().unwrap();
        let cup = |reward: usize| {
            let prizes: Vec<Value> = (1..=100).map(|rank| json!({"ranks": [rank, rank], "reward": "r".repeat(reward)})).collect();
            json!({"title": "Cup", "keep": "best", "start": "2027-01-01T00:00:00Z", "end": "2027-01-02T00:00:00Z", "join_required": false, "prizes": prizes})
        };
        Definition::tournament("cup", &cup(100), now).unwrap();
        let refused = Definition::tournament("cup", &cup(3000), now).unwrap_err();
        assert!(refused.field == "body" && refused.problem.contains(&MAX_DEFINITION_BYTES.to_string()), "{refused}");
    }
}
