//! The checks a board configuration passes before anything runs: every field in range, every
//! combination meaningful. Each error names the field (`boards[1].rules[0].points`).

use super::*;
use crate::domain::tiebreak::MAX_SCORE;

pub(super) fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field: field.into(), problem: problem.into() }
}

pub(super) fn validate_board(at: &str, raw: RawBoard) -> Result<Board, ConfigError> {
    if ids::validate_board_name(&raw.name).is_err() {
        return Err(invalid(format!("{at}.name"), "must be 1-32 characters of a-z, 0-9 and '-'"));
    }
    let timezone: Tz =
        raw.timezone.parse().map_err(|_| invalid(format!("{at}.timezone"), format!("unknown IANA timezone {:?}", raw.timezone)))?;
    if raw.top == 0 || raw.top > 1000 {
        return Err(invalid(format!("{at}.top"), "must be between 1 and 1000"));
    }
    let week_start = match raw.week_start.as_deref() {
        None => chrono::Weekday::Mon,
        Some(day) => day
            .parse::<chrono::Weekday>()
            .ok()
            .filter(|_| day.len() > 3 && day.bytes().all(|b| b.is_ascii_lowercase()))
            .ok_or_else(|| invalid(format!("{at}.week_start"), "must be a day of the week: \"monday\" … \"sunday\""))?,
    };
    if raw.week_start.is_some() && !raw.periods.iter().any(|p| matches!(p, PeriodKind::Week(_))) {
        return Err(invalid(format!("{at}.week_start"), "the board has no week period"));
    }
    let mut raw = raw;
    for period in &mut raw.periods {
        if let PeriodKind::Week(start) = period {
            *start = week_start;
        }
    }
    let mut seen = HashSet::new();
    for (j, period) in raw.periods.iter().enumerate() {
        if !seen.insert(*period) {
            return Err(invalid(format!("{at}.periods[{j}]"), "listed twice"));
        }
    }
    match raw.kind {
        BoardKind::Cumulative => {
            if raw.periods.is_empty() {
                return Err(invalid(format!("{at}.periods"), "a cumulative board needs at least one period"));
            }
            if raw.decay.is_some() {
                return Err(invalid(format!("{at}.decay"), "only decaying boards decay"));
            }
        }
        BoardKind::Scores => {
            if raw.periods.is_empty() {
                return Err(invalid(format!("{at}.periods"), "a score board needs at least one period"));
            }
            if raw.keep.is_none() {
                return Err(invalid(format!("{at}.keep"), "a score board keeps \"best\", \"latest\" or \"sum\""));
            }
            if !raw.rules.is_empty() || raw.sign_in.is_some() || raw.decay.is_some() {
                return Err(invalid(format!("{at}.kind"), "a score board takes submitted scores, not rules, sign-ins or decay"));
            }
        }
        BoardKind::Decaying => {
            let Some(decay) = &raw.decay else {
                return Err(invalid(format!("{at}.decay"), "a decaying board needs a decay section"));
            };
            validate_decay(&format!("{at}.decay"), decay)?;
            if !raw.periods.is_empty() || !raw.rules.is_empty() || raw.archive || raw.sign_in.is_some() || raw.statements {
                return Err(invalid(
                    format!("{at}.kind"),
                    "a decaying board takes heat, not rules, periods, sign-ins, archiving or statements",
                ));
            }
        }
    }
    if raw.archive && !raw.periods.contains(&PeriodKind::Season) {
        return Err(invalid(format!("{at}.archive"), "only boards with a season period can be archived"));
    }
    let shards = validate_shards(at, &raw)?;
    let league = match raw.league {
        None => None,
        Some(_) if raw.kind == BoardKind::Decaying => {
            return Err(invalid(format!("{at}.league"), "a decaying board has no periods to hold leagues in"));
        }
        Some(_) if raw.sign_in.is_some() => {
            return Err(invalid(
                format!("{at}.league"),
                "sign-ins score outside the write scripts that place players: a board takes sign-ins or a league",
            ));
        }
        Some(league) => {
            let league = crate::domain::league::validate(league, &raw.periods)
                .map_err(|(field, problem)| invalid(format!("{at}.league.{field}"), problem))?;
            if league.period == PeriodKind::Season && raw.archive {
                return Err(invalid(
                    format!("{at}.league.period"),
                    "the archive freezes a season's board before its league closes: use a month period for a monthly league",
                ));
            }
            Some(league)
        }
    };
    let notify = match raw.notify {
        None => None,
        Some(_) if raw.kind == BoardKind::Decaying || raw.sign_in.is_some() => {
            return Err(invalid(
                format!("{at}.notify"),
                "notifications follow the rule and score writes: a decaying or sign-in board has none",
            ));
        }
        Some(notify) => Some(
            crate::domain::notify::validate(notify, &raw.periods)
                .map_err(|(field, problem)| invalid(format!("{at}.notify.{field}"), problem))?,
        ),
    };
    for (j, rule) in raw.rules.iter().enumerate() {
        validate_rule(&format!("{at}.rules[{j}]"), rule)?;
    }
    let rules = Rules::new(raw.rules).map_err(|j| invalid(format!("{at}.rules[{j}].action"), "duplicate action on this board"))?;
    if let Some(sign_in) = &raw.sign_in {
        if !(1..=MAX_RULE_POINTS).contains(&sign_in.points) {
            return Err(invalid(format!("{at}.sign_in.points"), format!("must be 1..={MAX_RULE_POINTS}")));
        }
        let mut streaks = HashSet::new();
        for (j, (days, bonus)) in sign_in.streak_bonuses.iter().enumerate() {
            // A one-day "streak" is every sign-in: that is `points`, not a bonus. (The sign-in
            // script also relies on it: a late sign-in for yesterday re-evaluates today's
            // streak, which was 1 when today was signed.)
            if !(2..=MAX_BONUS_STREAK).contains(days) || !(1..=MAX_RULE_POINTS).contains(bonus) {
                return Err(invalid(
                    format!("{at}.sign_in.streak_bonuses[{j}]"),
                    format!("needs a streak of 2..={MAX_BONUS_STREAK} days and a bonus of 1..={MAX_RULE_POINTS}"),
                ));
            }
            if !streaks.insert(*days) {
                return Err(invalid(format!("{at}.sign_in.streak_bonuses[{j}]"), "streak listed twice"));
            }
        }
    }
    let scores = match (raw.kind, raw.keep) {
        (BoardKind::Scores, Some(keep)) => {
            if let Some(limit) = raw.rate_limit {
                validate_rate_limit(&format!("{at}.rate_limit"), limit)?;
            }
            let max_score = raw.max_score.unwrap_or(MAX_SCORE);
            if !(1..=MAX_SCORE).contains(&max_score) {
                return Err(invalid(format!("{at}.max_score"), format!("must be within 1..={MAX_SCORE}")));
            }
            Some(ScoreRules { keep, order: raw.order.unwrap_or_default(), rate_limit: raw.rate_limit, max_score })
        }
        _ if raw.keep.is_some() || raw.order.is_some() || raw.rate_limit.is_some() || raw.max_score.is_some() => {
            return Err(invalid(format!("{at}.kind"), "keep, order, max_score and a board-wide rate_limit belong to score boards"));
        }
        _ => None,
    };
    Ok(Board {
        shards,
        name: raw.name,
        kind: raw.kind,
        timezone,
        periods: raw.periods,
        top: raw.top,
        archive: raw.archive,
        rules,
        sign_in: raw.sign_in,
        decay: raw.decay,
        wait_replicas: raw.wait_replicas,
        scores,
        statements: raw.statements,
        league,
        notify,
        runtime: false,
        ending: false,
        tournament: None,
    })
}

/// A board spread over shards (docs/scaling.md): 1..=`MAX_SHARDS`, and only what is built for
/// it (rule and score boards, archived or not, with sign-ins, without league, notifications or rules that
/// count a target once on the whole board yet), never half-supported.
fn validate_shards(at: &str, raw: &RawBoard) -> Result<u32, ConfigError> {
    let Some(shards) = raw.shards else { return Ok(1) };
    let field = format!("{at}.shards");
    if !(1..=MAX_SHARDS).contains(&shards) {
        return Err(invalid(field, format!("must be within 1..={}", MAX_SHARDS)));
    }
    if shards == 1 {
        return Ok(1);
    }
    let refusal = if raw.kind == BoardKind::Decaying {
        Some("a decaying (hot) board cannot be sharded: its synthesis reads every bucket at once")
    } else if raw.league.is_some() {
        Some("a board with a `league` cannot be sharded: cohorts span every member")
    } else if raw.notify.is_some() {
        Some("a board with `notify` cannot be sharded: rank moves need the whole board")
    } else if raw.rules.iter().any(|rule| rule.scope == Scope::Target) {
        Some("a rule of scope \"target\" counts a target once on the whole board, which no shard sees")
    } else {
        None
    };
    match refusal {
        Some(problem) => Err(invalid(field, problem)),
        None => Ok(shards),
    }
}

fn validate_rule(at: &str, rule: &Rule) -> Result<(), ConfigError> {
    if ids::validate_action(&rule.action).is_err() {
        return Err(invalid(format!("{at}.action"), "must be 1-32 characters of a-z, 0-9 and '_'"));
    }
    // Ledgers written by earlier releases hold `<action>|<target>` beside the cap counters
    // `cap|<action>`: an action named `cap` could name another action's counter.
    if rule.action == "cap" {
        return Err(invalid(format!("{at}.action"), "\"cap\" is reserved (it names daily cap counters)"));
    }
    if !(1..=MAX_RULE_POINTS).contains(&rule.points) {
        return Err(invalid(format!("{at}.points"), format!("must be 1..={MAX_RULE_POINTS}")));
    }
    if let Some(max) = rule.max_points
        && !(rule.points..=MAX_RULE_POINTS).contains(&max)
    {
        return Err(invalid(format!("{at}.max_points"), "must be at least points and within range"));
    }
    if let Some(cap) = rule.daily_cap
        && cap < 1
    {
        return Err(invalid(format!("{at}.daily_cap"), "must be positive"));
    }
    if let Some(limit) = rule.rate_limit {
        validate_rate_limit(&format!("{at}.rate_limit"), limit)?;
    }
    if rule.reversible && rule.scope != Scope::UserTargetDay {
        return Err(invalid(
            format!("{at}.reversible"),
            "only user_target_day rules can be reversed (a take-back needs that day's ledger)",
        ));
    }
    Ok(())
}

fn validate_rate_limit(at: &str, limit: RateLimit) -> Result<(), ConfigError> {
    if !(1..=MAX_RATE_LIMIT).contains(&limit.max) {
        return Err(invalid(format!("{at}.max"), format!("must be 1..={MAX_RATE_LIMIT}")));
    }
    if !(1..=MAX_RATE_WINDOW_SECS).contains(&limit.per_secs) {
        return Err(invalid(format!("{at}.per_secs"), format!("must be 1..={MAX_RATE_WINDOW_SECS}")));
    }
    Ok(())
}

fn validate_decay(at: &str, decay: &Decay) -> Result<(), ConfigError> {
    match decay {
        Decay::Window { window_hours, weights, linear_step, half_life_hours, synthesized_ttl_secs } => {
            if !(1..=168).contains(window_hours) {
                return Err(invalid(format!("{at}.window_hours"), "must be 1..=168"));
            }
            if *synthesized_ttl_secs < 60 {
                return Err(invalid(format!("{at}.synthesized_ttl_secs"), "must be at least 60"));
            }
            match weights {
                Weights::Linear => {
                    let step = linear_step.ok_or_else(|| invalid(format!("{at}.linear_step"), "required for linear weights"))?;
                    if !(step > 0.0 && step * f64::from(*window_hours - 1) < 1.0) {
                        return Err(invalid(format!("{at}.linear_step"), "must keep every weight in the window above 0"));
                    }
                }
                Weights::Exponential => {
                    let half_life =
                        half_life_hours.ok_or_else(|| invalid(format!("{at}.half_life_hours"), "required for exponential weights"))?;
                    if !(half_life > 0.0 && half_life.is_finite()) {
                        return Err(invalid(format!("{at}.half_life_hours"), "must be positive"));
                    }
                }
            }
        }
        Decay::Scale { factor, every_minutes } => {
            if !(*factor > 0.0 && *factor < 1.0) {
                return Err(invalid(format!("{at}.factor"), "must be between 0 and 1"));
            }
            if !(1..=MAX_SCALE_MINUTES).contains(every_minutes) {
                return Err(invalid(format!("{at}.every_minutes"), format!("must be 1..={} (366 days)", MAX_SCALE_MINUTES)));
            }
        }
    }
    Ok(())
}
