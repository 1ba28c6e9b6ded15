use super::*;

#[test]
fn the_embedded_default_has_the_spec_boards_and_two_score_boards() {
    let config = Config::default_boards();
    let names: Vec<_> = config.boards().iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["activity", "invites", "points", "hot-videos", "high-scores", "lap-times", "xp"]);
    let activity = config.board("activity").unwrap();
    assert_eq!(activity.periods, [PeriodKind::Day, PeriodKind::Month]);
    assert_eq!(activity.timezone, chrono_tz::Asia::Shanghai);
    assert_eq!(activity.top, 30);
    assert_eq!(activity.rule("comment").unwrap().points, 3);
    assert!(activity.rule("praise").unwrap().reversible);
    assert!(!activity.rule("publish").unwrap().reversible);
    assert_eq!(config.board("points").unwrap().rule("learning").unwrap().daily_cap, Some(50));
    assert!(config.board("points").unwrap().archive);
    assert_eq!(config.board("invites").unwrap().rule("invite").unwrap().scope, Scope::Target);
}

fn problem_field(text: &str) -> String {
    match Config::parse(text).unwrap_err() {
        ConfigError::Invalid { field, .. } => field,
        other => panic!("expected a field error, got {other}"),
    }
}

const BOARD: &str = r#"
    [[boards]]
    name = "b"
    kind = "cumulative"
    timezone = "UTC"
    periods = ["day"]
    top = 10
"#;

#[test]
fn errors_name_the_bad_field() {
    assert_eq!(problem_field(&BOARD.replace("\"UTC\"", "\"Mars/Olympus\"")), "boards[0].timezone");
    assert_eq!(problem_field(&BOARD.replace("\"b\"", "\"B{x}\"")), "boards[0].name");
    assert_eq!(problem_field(&BOARD.replace("top = 10", "top = 0")), "boards[0].top");
    assert_eq!(
        problem_field(&format!("{BOARD}\nrules = [{{ action = \"a\", points = 0, scope = \"none\" }}]")),
        "boards[0].rules[0].points"
    );
    assert_eq!(
        problem_field(&format!("{BOARD}\nrules = [{{ action = \"a\", points = 1, scope = \"none\", reversible = true }}]")),
        "boards[0].rules[0].reversible"
    );
    assert_eq!(problem_field(&format!("{BOARD}{BOARD}")), "boards[1].name");
    assert_eq!(problem_field(&BOARD.replace("periods = [\"day\"]", "periods = []")), "boards[0].periods");
}

#[test]
fn a_scale_period_is_bounded() {
    let scale = |minutes: u64| {
        format!(
            "[[boards]]\nname = \"h\"\nkind = \"decaying\"\ntimezone = \"UTC\"\ntop = 10\ndecay = {{ mode = \"scale\", factor = 0.9, every_minutes = {minutes} }}\n"
        )
    };
    Config::parse(&scale(u64::from(MAX_SCALE_MINUTES))).unwrap();
    for minutes in [0, u64::from(MAX_SCALE_MINUTES) + 1, 200_000_000] {
        assert_eq!(problem_field(&scale(minutes)), "boards[0].decay.every_minutes", "{minutes}");
    }
}

#[test]
fn rate_limits_and_sign_ins_are_validated_field_by_field() {
    let rule = |limit: &str| format!("{BOARD}\nrules = [{{ action = \"a\", points = 1, scope = \"none\", rate_limit = {limit} }}]");
    assert_eq!(problem_field(&rule("{ max = 0, per_secs = 60 }")), "boards[0].rules[0].rate_limit.max");
    assert_eq!(problem_field(&rule("{ max = 10001, per_secs = 60 }")), "boards[0].rules[0].rate_limit.max");
    assert_eq!(problem_field(&rule("{ max = 10, per_secs = 0 }")), "boards[0].rules[0].rate_limit.per_secs");
    assert_eq!(problem_field(&rule("{ max = 10, per_secs = 86401 }")), "boards[0].rules[0].rate_limit.per_secs");
    assert!(matches!(Config::parse(&rule("{ max = 10 }")), Err(ConfigError::Syntax(m)) if m.contains("per_secs")));
    let limited = Config::parse(&rule("{ max = 10, per_secs = 60 }")).unwrap();
    assert_eq!(limited.boards()[0].rule("a").unwrap().rate_limit, Some(RateLimit { max: 10, per_secs: 60 }));

    let sign_in = |section: &str| format!("{BOARD}\nsign_in = {section}");
    assert_eq!(problem_field(&sign_in("{ points = 0 }")), "boards[0].sign_in.points");
    assert_eq!(problem_field(&sign_in("{ points = 1, streak_bonuses = [[1, 5]] }")), "boards[0].sign_in.streak_bonuses[0]");
    assert_eq!(problem_field(&sign_in("{ points = 1, streak_bonuses = [[7, 5], [7, 6]] }")), "boards[0].sign_in.streak_bonuses[1]");
    let two = format!("{}{}", sign_in("{ points = 1 }"), sign_in("{ points = 1 }").replace("\"b\"", "\"c\""));
    assert_eq!(problem_field(&two), "boards[1].sign_in");
    let points = Config::default_boards();
    let board = points.sign_in_board().unwrap();
    assert_eq!(board.name, "points");
    let bonuses = board.sign_in.as_ref().unwrap();
    assert_eq!([6, 7, 14, 28, 29].map(|d| bonuses.bonus(d)), [0, 10, 20, 40, 0]);
}

#[test]
fn weeks_and_leagues_are_validated_field_by_field() {
    let week = BOARD.replace(r#"periods = ["day"]"#, r#"periods = ["week", "season"]"#);
    let league = r#"league = { period = "week", cohort_size = 3, tiers = ["a", "b"], promote = 1, demote = 1 }"#;
    let parsed = Config::parse(&format!(
        "{week}
week_start = \"sunday\"
{league}"
    ))
    .unwrap();
    assert_eq!(parsed.boards()[0].periods[0], PeriodKind::Week(chrono::Weekday::Sun));
    assert_eq!(parsed.boards()[0].league.as_ref().unwrap().period, PeriodKind::Week(chrono::Weekday::Sun));
    assert_eq!(
        problem_field(&format!(
            "{week}
week_start = \"sun\""
        )),
        "boards[0].week_start"
    );
    assert_eq!(
        problem_field(&format!(
            "{BOARD}
week_start = \"monday\""
        )),
        "boards[0].week_start"
    );
    assert_eq!(
        problem_field(&format!(
            "{week}
{}",
            league.replace("cohort_size = 3", "cohort_size = 1")
        )),
        "boards[0].league.cohort_size"
    );
    let season = league.replace(r#"period = "week""#, r#"period = "season""#);
    assert_eq!(
        problem_field(&format!(
            "{week}
archive = true
{season}"
        )),
        "boards[0].league.period"
    );
    assert!(
        Config::parse(&format!(
            "{week}
{season}"
        ))
        .is_ok(),
        "a season league on a board that is not archived"
    );
    assert_eq!(
        problem_field(&format!(
            "{week}
sign_in = {{ points = 1 }}
{league}"
        )),
        "boards[0].league"
    );
}

#[test]
fn unknown_keys_are_syntax_errors() {
    assert!(matches!(
        Config::parse(&format!("{BOARD}\ncolour = \"red\"")),
        Err(ConfigError::Syntax(message)) if message.contains("colour")
    ));
}

/// A board's rules are held sorted by action; a second rule for an action is refused naming the
/// first one that repeats, in the order written.
#[test]
fn rules_are_found_by_action_and_a_repeated_action_is_named() {
    let rule = |action: &str| format!("\n    [[boards.rules]]\n    action = \"{action}\"\n    points = 1\n    scope = \"none\"\n");
    let board = |actions: &[&str]| format!("{BOARD}{}", actions.iter().map(|a| rule(a)).collect::<String>());
    let config = Config::parse(&board(&["zeta", "alpha", "mid"])).unwrap();
    let held = config.board("b").unwrap();
    assert_eq!(held.rules.keys().collect::<Vec<_>>(), ["alpha", "mid", "zeta"]);
    assert_eq!(held.rule("mid").map(|r| r.action.as_str()), Some("mid"));
    assert!(held.rule("nope").is_none() && held.rule("").is_none());
    assert_eq!(problem_field(&board(&["b", "a", "b", "a"])), "boards[0].rules[2].action");
}
