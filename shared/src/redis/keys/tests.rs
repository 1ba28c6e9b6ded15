use super::*;
use crate::domain::period::PeriodKind;
use chrono::NaiveDate;

/// Redis Cluster's hash tag rule: the first `{…}` with something inside.
fn hash_tag(key: &str) -> &str {
    let open = key.find('{').unwrap();
    let close = open + key[open..].find('}').unwrap();
    &key[open + 1..close]
}

#[test]
fn every_board_key_carries_the_board_tag_first() {
    let board = Keys::new("st").unwrap().board("activity");
    let day = Period::on_date(PeriodKind::Day, NaiveDate::from_ymd_opt(2026, 11, 22).unwrap(), chrono_tz::UTC);
    let keys = [
        board.period(&day),
        board.event("e-1"),
        board.marker_bucket(20_416, 1023),
        board.day_ledger("u1", "2026-11-22"),
        board.lifetime_ledger("u1"),
        board.target_ledger(),
        board.guard(),
        board.hot_bucket(chrono::DateTime::from_timestamp(1_795_312_800, 0).unwrap()),
        board.hot_board(),
        board.hot_board_next(),
        board.hot_meta(),
        board.sign_ins("u1", "2026-11"),
        board.rate_log("u1", "learning"),
        board.audit(),
        board.frozen(&day),
        board.arrivals(&day),
        board.journal(),
        board.notices(),
        board.notices_quiet(),
        board.notices_lock(),
        board.notices_count(),
        board.restore_checkpoint(),
        board.restore_lock(),
    ];
    for key in &keys {
        assert_eq!(hash_tag(key), "activity", "{key}");
        assert!(key.starts_with("st:v1:{activity}:"));
    }
    assert_eq!(keys[0], "st:v1:{activity}:z:day:2026-11-22");
    assert_eq!(keys[7], "st:v1:{activity}:hot:h:2026-11-22T02:00Z");
    assert_eq!(keys[2], "st:v1:{activity}:evt:20416:1023");
}

#[test]
fn profiles_live_in_their_shard_beside_its_journal() {
    let keys = Keys::new("st").unwrap();
    let profile = keys.profile("u1");
    let shard = keys.profile_shard_journal("u1");
    assert_eq!(hash_tag(&profile), hash_tag(&shard.journal()));
    assert!(profile.starts_with("st:v1:{_profiles-") && profile.ends_with("}:profile:u1"), "{profile}");
    assert_eq!(keys.legacy_profile("u1"), "st:v1:{u:u1}:profile");
    // Users spread over every shard.
    let shards: std::collections::HashSet<String> = (0..400).map(|i| hash_tag(&keys.profile(&format!("user-{i}"))).to_owned()).collect();
    assert_eq!(shards.len(), super::PROFILE_SHARDS as usize);
}

/// One key Standings can build, named by its kind and the ids it is built from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Spec {
    Period(String, PeriodKind, NaiveDate),
    Frozen(String, PeriodKind, NaiveDate),
    Arrivals(String, PeriodKind, NaiveDate),
    MarkerBucket(String, i64, u16),
    Event(String, String),
    Correction(String, String),
    Void(String, String),
    Statement(String, String, PeriodKind, NaiveDate),
    DayLedger(String, String, NaiveDate),
    LifetimeLedger(String, String),
    Guard(String),
    Targets(String),
    SignIns(String, String, NaiveDate),
    RateLog(String, String, String),
    Audit(String),
    Journal(String),
    Notices(String),
    NoticesQuiet(String),
    NoticesLock(String),
    NoticesCount(String),
    Restore(String),
    RestoreLock(String),
    HotBucket(String, i64),
    HotBoard(String),
    HotNext(String),
    HotMeta(String),
    Profile(String),
    LeagueMembers(String, NaiveDate),
    LeagueCohorts(String, NaiveDate),
    LeagueOrder(String, NaiveDate),
    LeagueCounts(String, NaiveDate),
    LeaguePending(String, NaiveDate),
    LeagueResults(String, NaiveDate),
    LeagueTiers(String),
}

fn build(keys: &Keys, spec: &Spec) -> String {
    let period = |kind: &PeriodKind, date: &NaiveDate| Period::on_date(*kind, *date, chrono_tz::UTC);
    let week = |date: &NaiveDate| period(&PeriodKind::Week(chrono::Weekday::Mon), date).id;
    match spec {
        Spec::Period(b, k, d) => keys.board(b).period(&period(k, d)),
        Spec::Frozen(b, k, d) => keys.board(b).frozen(&period(k, d)),
        Spec::Arrivals(b, k, d) => keys.board(b).arrivals(&period(k, d)),
        Spec::MarkerBucket(b, day, shard) => keys.board(b).marker_bucket(*day, *shard),
        Spec::Event(b, id) => keys.board(b).event(id),
        Spec::Correction(b, id) => keys.board(b).correction(id),
        Spec::Void(b, id) => keys.board(b).void(id),
        Spec::Statement(b, user, k, d) => keys.board(b).statement(user, &period(k, d)),
        Spec::DayLedger(b, user, d) => keys.board(b).day_ledger(user, &d.to_string()),
        Spec::LifetimeLedger(b, user) => keys.board(b).lifetime_ledger(user),
        Spec::Guard(b) => keys.board(b).guard(),
        Spec::Targets(b) => keys.board(b).target_ledger(),
        Spec::SignIns(b, user, d) => keys.board(b).sign_ins(user, &d.format("%Y-%m").to_string()),
        Spec::RateLog(b, user, action) => keys.board(b).rate_log(user, action),
        Spec::Audit(b) => keys.board(b).audit(),
        Spec::Journal(b) => keys.board(b).journal(),
        Spec::Notices(b) => keys.board(b).notices(),
        Spec::NoticesQuiet(b) => keys.board(b).notices_quiet(),
        Spec::NoticesLock(b) => keys.board(b).notices_lock(),
        Spec::NoticesCount(b) => keys.board(b).notices_count(),
        Spec::Restore(b) => keys.board(b).restore_checkpoint(),
        Spec::RestoreLock(b) => keys.board(b).restore_lock(),
        Spec::HotBucket(b, hour) => keys.board(b).hot_bucket(chrono::DateTime::from_timestamp(hour * 3600, 0).unwrap()),
        Spec::HotBoard(b) => keys.board(b).hot_board(),
        Spec::HotNext(b) => keys.board(b).hot_board_next(),
        Spec::HotMeta(b) => keys.board(b).hot_meta(),
        Spec::Profile(user) => keys.profile(user),
        Spec::LeagueMembers(b, d) => keys.board(b).league_members(&week(d)),
        Spec::LeagueCohorts(b, d) => keys.board(b).league_cohorts(&week(d)),
        Spec::LeagueOrder(b, d) => keys.board(b).league_order(&week(d)),
        Spec::LeagueCounts(b, d) => keys.board(b).league_counts(&week(d)),
        Spec::LeaguePending(b, d) => keys.board(b).league_pending(&week(d)),
        Spec::LeagueResults(b, d) => keys.board(b).league_results(&week(d)),
        Spec::LeagueTiers(b) => keys.board(b).league_tiers(),
    }
}

mod generated {
    use super::*;
    use proptest::prelude::*;

    /// Client ids from a small alphabet, so that ids shaped like other keys' parts (days,
    /// shards, dates, months, `a:b` pairs) come up often.
    fn client_id() -> impl Strategy<Value = String> {
        prop_oneof![
            "[0-2a:]{1,5}",
            (0i64..3, 0u16..3).prop_map(|(day, shard)| format!("{day}:{shard}")),
            prop::sample::select(vec!["u", "u:2026-11-22", "u:2026-11", "2026-11-22", "2026-11", "z:day", "1:2:3", "season:2026-11"])
                .prop_map(str::to_owned),
        ]
    }

    fn board() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["a", "b", "a-b", "u"]).prop_map(str::to_owned)
    }

    fn action() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["comment", "a", "a_b", "2026", "score-submissions"]).prop_map(str::to_owned)
    }

    fn kind() -> impl Strategy<Value = PeriodKind> {
        prop::sample::select(vec![
            PeriodKind::Day,
            PeriodKind::Week(chrono::Weekday::Mon),
            PeriodKind::Month,
            PeriodKind::Season,
            PeriodKind::All,
            // Two schedules that never fire in the same minute (one board has one schedule).
            PeriodKind::Cron(crate::domain::period::Cron::parse("0 */6 * * *").unwrap()),
            PeriodKind::Cron(crate::domain::period::Cron::parse("30 18 * * *").unwrap()),
        ])
    }

    fn date() -> impl Strategy<Value = NaiveDate> {
        (0u64..3).prop_map(|d| NaiveDate::from_ymd_opt(2026, 11, 21).unwrap() + chrono::Days::new(d))
    }

    /// The first day of a month: what names a month (sign-ins) when any of its days would.
    fn month() -> impl Strategy<Value = NaiveDate> {
        prop::sample::select(vec![NaiveDate::from_ymd_opt(2026, 10, 1).unwrap(), NaiveDate::from_ymd_opt(2026, 11, 1).unwrap()])
    }

    /// The Monday of a week: what names a week when any of its days would.
    fn monday() -> impl Strategy<Value = NaiveDate> {
        prop::sample::select(vec![NaiveDate::from_ymd_opt(2026, 11, 16).unwrap(), NaiveDate::from_ymd_opt(2026, 11, 23).unwrap()])
    }

    /// A period as (kind, its first day), so two specs of one period are equal.
    fn period() -> impl Strategy<Value = (PeriodKind, NaiveDate)> {
        (kind(), date()).prop_map(|(k, d)| {
            let start = Period::on_date(k, d, chrono_tz::UTC).start.map_or(NaiveDate::MIN, |s| s.date_naive());
            (k, start)
        })
    }

    fn spec() -> impl Strategy<Value = Spec> {
        prop_oneof![
            (board(), period()).prop_map(|(b, (k, d))| Spec::Period(b, k, d)),
            (board(), period()).prop_map(|(b, (k, d))| Spec::Frozen(b, k, d)),
            (board(), period()).prop_map(|(b, (k, d))| Spec::Arrivals(b, k, d)),
            (board(), 0i64..3, 0u16..3).prop_map(|(b, day, shard)| Spec::MarkerBucket(b, day, shard)),
            (board(), client_id()).prop_map(|(b, id)| Spec::Event(b, id)),
            (board(), client_id()).prop_map(|(b, id)| Spec::Correction(b, id)),
            (board(), client_id()).prop_map(|(b, id)| Spec::Void(b, id)),
            (board(), client_id(), period()).prop_map(|(b, u, (k, d))| Spec::Statement(b, u, k, d)),
            (board(), client_id(), date()).prop_map(|(b, u, d)| Spec::DayLedger(b, u, d)),
            (board(), client_id()).prop_map(|(b, u)| Spec::LifetimeLedger(b, u)),
            board().prop_map(Spec::Guard),
            board().prop_map(Spec::Targets),
            (board(), client_id(), month()).prop_map(|(b, u, d)| Spec::SignIns(b, u, d)),
            (board(), client_id(), action()).prop_map(|(b, u, a)| Spec::RateLog(b, u, a)),
            board().prop_map(Spec::Audit),
            board().prop_map(Spec::Journal),
            board().prop_map(Spec::Notices),
            board().prop_map(Spec::NoticesQuiet),
            board().prop_map(Spec::NoticesLock),
            board().prop_map(Spec::NoticesCount),
            board().prop_map(Spec::Restore),
            board().prop_map(Spec::RestoreLock),
            (board(), 0i64..3).prop_map(|(b, h)| Spec::HotBucket(b, h)),
            board().prop_map(Spec::HotBoard),
            board().prop_map(Spec::HotNext),
            board().prop_map(Spec::HotMeta),
            client_id().prop_map(Spec::Profile),
            (board(), monday()).prop_map(|(b, d)| Spec::LeagueMembers(b, d)),
            (board(), monday()).prop_map(|(b, d)| Spec::LeagueCohorts(b, d)),
            (board(), monday()).prop_map(|(b, d)| Spec::LeagueOrder(b, d)),
            (board(), monday()).prop_map(|(b, d)| Spec::LeagueCounts(b, d)),
            (board(), monday()).prop_map(|(b, d)| Spec::LeaguePending(b, d)),
            (board(), monday()).prop_map(|(b, d)| Spec::LeagueResults(b, d)),
            board().prop_map(Spec::LeagueTiers),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Two different (kind, ids) never build the same key, whatever the ids look like.
        #[test]
        fn no_two_kinds_or_ids_build_the_same_key(specs in prop::collection::vec(spec(), 1..200)) {
            let keys = Keys::new("st").unwrap();
            let mut seen = std::collections::HashMap::new();
            for spec in specs {
                let key = build(&keys, &spec);
                if let Some(other) = seen.insert(key.clone(), spec.clone()) {
                    prop_assert_eq!(&other, &spec, "both build {}", key);
                }
            }
        }
    }
}

#[test]
fn a_replay_gives_keys_what_is_left_of_the_original_ttl() {
    let live = Keys::new("st").unwrap().board("points");
    let replay = Keys::new("st").unwrap().replaying().board("points");
    let hour_ago = Utc::now() - chrono::Duration::hours(1);
    assert_eq!(live.ttl(7200, hour_ago), 7200);
    assert!((3599..=3600).contains(&replay.ttl(7200, hour_ago)), "{}", replay.ttl(7200, hour_ago));
    assert_eq!(replay.ttl(1800, hour_ago), REPLAY_EXPIRED_TTL_SECS, "expired by now: kept for the rest of the replay");
    assert_eq!(replay.ttl(0, hour_ago), 0, "none stays none");
    assert!(!replay.journaled(), "a replay journals nothing");
    let shadow = Keys::new("st").unwrap().shadow(7).unwrap().board("points");
    assert_eq!((shadow.ttl(0, hour_ago), shadow.ttl(7200, hour_ago)), (SHADOW_TTL_SECS, SHADOW_TTL_SECS));
    assert!(
        shadow
            .period(&Period::on_date(PeriodKind::All, NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(), chrono_tz::UTC))
            .starts_with("st:shadow-7:v1:{points}:")
    );
}

#[test]
fn prefixes_cannot_move_the_hash_tag() {
    assert!(Keys::new("a{b}").is_err());
    assert!(Keys::new("").is_err());
    assert!(Keys::new("tenant-1:test").is_ok());
}

#[test]
fn a_kept_record_names_its_period_set_in_its_own_shard_only() {
    let board = Keys::new("st").unwrap().board("activity");
    let day = Period::on_date(PeriodKind::Day, NaiveDate::from_ymd_opt(2026, 11, 22).unwrap(), chrono_tz::UTC);
    assert_eq!(board.kept_set("kept|day:2026-11-22"), Some(board.period(&day)));
    assert_eq!(board.kept_set("born"), None);
    assert_eq!(board.kept_set("closed|day:2026-11-22"), None);
    // Whatever a field holds, the key stays in the board's slot.
    let odd = board.kept_set("kept|}:x:{other").unwrap();
    assert_eq!(hash_tag(&odd), "activity", "{odd}");
    // And back: the field recording a set of this board, none for another board's.
    assert_eq!(board.kept_field(&board.period(&day)).as_deref(), Some("kept|day:2026-11-22"));
    assert_eq!(board.kept_field(&Keys::new("st").unwrap().board("other").period(&day)), None);
    assert_eq!(board.kept_field(&board.guard()), None);
}

#[test]
fn the_keys_holding_composites_are_told_by_their_relative_name() {
    let board = Keys::new("st").unwrap().board("game");
    let day = Period::on_date(PeriodKind::Day, NaiveDate::from_ymd_opt(2026, 11, 22).unwrap(), chrono_tz::UTC);
    let relative = |key: String| board.relative_of(&key).unwrap().to_owned();
    for (key, holds) in [(board.period(&day), Holds::Scores), (board.frozen(&day), Holds::Scores), (board.arrivals(&day), Holds::Arrivals)]
    {
        assert_eq!(BoardKeys::composites_in(&relative(key)), Some((holds, "day", "2026-11-22")));
    }
    assert_eq!(BoardKeys::composites_in(&relative(board.league_order("2026-W48"))), Some((Holds::CohortOrder, "", "2026-W48")));
    for other in [board.guard(), board.statement("u1", &day), board.journal(), board.marker_bucket(3, 1)] {
        assert_eq!(BoardKeys::composites_in(&relative(other)), None);
    }
}
