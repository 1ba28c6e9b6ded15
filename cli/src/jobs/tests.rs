use super::*;

#[test]
fn payloads_are_the_functions_documented_ones() {
    assert_eq!(Job::Restore { board: None, campaign: None }.payload(), json!({"restore": {}}));
    assert_eq!(Job::Restore { board: Some("points".into()), campaign: None }.payload(), json!({"restore": {"board": "points"}}));
    assert_eq!(Job::Reshard { board: "launch".into() }.payload(), json!({"reshard": {"board": "launch"}}));
    assert_eq!(Job::Drain { release_held: true }.payload(), json!({"drain": {"release_held": true}}));
    assert_eq!(
        Job::Archive { board: "b".into(), season: "2026-10".into(), shard: None }.payload(),
        json!({"board": "b", "season": "2026-10"})
    );
    assert_eq!(
        Job::Archive { board: "b".into(), season: "2026-10".into(), shard: Some((1, 4)) }.payload(),
        json!({"board": "b", "season": "2026-10", "shard_index": 1, "shard_total": 4})
    );
    assert_eq!(
        Job::LeagueClose { board: "xp".into(), period_id: "2026-W47".into() }.payload(),
        json!({"league": {"board": "xp", "period_id": "2026-W47"}})
    );
    let dry_run = Job::DryRun { board: "b".into(), period: "all".into(), period_id: "all".into(), config: "x".into() };
    assert_eq!(dry_run.payload(), json!({"dry_run": {"board": "b", "period": "all", "period_id": "all", "config": "x"}}));
}

#[test]
fn a_restore_goes_on_with_the_campaign_its_last_invocation_answered() {
    let restore = Job::Restore { board: Some("points".into()), campaign: None };
    let answer = json!({"status": "in_progress", "boards": [], "campaign": "00ff00ff00ff00ff"});
    assert_eq!(restore.next_payload(&answer), json!({"restore": {"board": "points", "campaign": "00ff00ff00ff00ff"}}));
    assert_eq!(restore.next_payload(&json!({"status": "in_progress", "boards": []})), restore.payload());
    let resumed = Job::Restore { board: None, campaign: Some("00ff00ff00ff00ff".into()) };
    assert_eq!(resumed.payload(), json!({"restore": {"campaign": "00ff00ff00ff00ff"}}), "--campaign");
    let reshard = Job::Reshard { board: "launch".into() };
    assert_eq!(reshard.next_payload(&answer), reshard.payload(), "a restore's alone");
}

#[test]
fn a_restore_completes_on_its_status_and_an_archive_when_no_season_is_in_progress() {
    let restore = Job::Restore { board: None, campaign: None };
    assert!(!restore.completed(&json!({"status": "in_progress", "boards": []})));
    assert!(restore.completed(&json!({"status": "complete", "boards": []})));
    let archive = Job::Archive { board: "b".into(), season: "s".into(), shard: None };
    assert!(!archive.completed(&json!({"results": [{"status": "complete"}, {"status": "in_progress"}]})));
    assert!(archive.completed(&json!({"results": [{"status": "already_complete"}]})));
    let drain = Job::Drain { release_held: false };
    assert!(!drain.completed(&json!({"complete": false, "boards": []})), "stopped by its deadline: invoked again");
    assert!(drain.completed(&json!({"complete": true, "boards": []})));
    assert!(drain.completed(&json!({"boards": []})), "a function from before the field");
    assert!(!archive.completed(&json!({"error": "x"})), "an answer with no reports is not a completion");
    let league = Job::LeagueClose { board: "xp".into(), period_id: "2026-W47".into() };
    assert!(!league.completed(&json!({"results": [], "leagues": [{"status": "in_progress"}]})));
    assert!(league.completed(&json!({"results": [], "leagues": [{"status": "complete"}]})));
}

#[test]
fn the_summary_sums_each_boards_counters_over_the_invocations() {
    let first = json!({"status": "in_progress", "boards": [
        {"board": "a", "status": "complete", "applied": 10, "refused": 1},
        {"board": "b", "status": "in_progress", "applied": 5}]});
    let second = json!({"status": "complete", "boards": [{"board": "b", "status": "complete", "applied": 7}]});
    let summary = merged(first, second);
    assert_eq!(summary["status"], "complete");
    let boards = summary["boards"].as_array().unwrap();
    assert_eq!(boards.len(), 2);
    assert_eq!(boards[0], json!({"board": "b", "status": "complete", "applied": 12}));
    assert_eq!(boards[1], json!({"board": "a", "status": "complete", "applied": 10, "refused": 1}));
}

#[test]
fn an_answer_that_is_no_report_is_not_taken_for_one() {
    let restore = Job::Restore { board: None, campaign: None };
    assert!(!restore.answered(&json!({"errorMessage": "boom"})));
    assert!(!restore.answered(&Value::Null));
    assert!(restore.answered(&json!({"status": "in_progress", "boards": []})));
    assert!(!Job::Drain { release_held: false }.answered(&json!("text")));
}

#[test]
fn progress_counts_boards_done_and_lines_replayed() {
    let answer = json!({"status": "in_progress", "boards": [
        {"board": "a", "status": "complete", "replayed": 10},
        {"board": "b", "status": "in_progress", "replayed": 5}]});
    assert_eq!(Progress::of(2, &answer), Progress { invocations: 2, boards_done: 1, boards: 2, units: 15, ..Progress::default() });
}

#[test]
fn a_board_complete_before_keeps_its_row_when_a_later_invocation_passes_through_it_again() {
    let first = json!({"status": "in_progress", "boards": [
        {"board": "a", "status": "complete", "applied": 10, "read_bytes": 600, "journal_bytes": 600, "left_bytes": 0},
        {"board": "b", "status": "in_progress", "applied": 5, "read_bytes": 100, "journal_bytes": 400, "left_bytes": 300}]});
    let second = json!({"status": "complete", "boards": [
        {"board": "a", "status": "complete", "applied": 0, "duplicates": 10, "read_bytes": 600, "journal_bytes": 600, "left_bytes": 0},
        {"board": "b", "status": "complete", "applied": 7, "read_bytes": 300, "journal_bytes": 400, "left_bytes": 0}]});
    let summary = merged(first, second);
    assert_eq!(summary["boards"][0]["applied"], 10);
    assert_eq!(summary["boards"][0]["duplicates"], Value::Null);
    assert_eq!((&summary["boards"][1]["applied"], &summary["boards"][1]["read_bytes"]), (&json!(12), &json!(400)));
}

#[test]
fn every_job_counts_its_boards() {
    let reshard = json!({"board": "launch", "from": 1, "to": 4, "status": "in_progress", "moved": 200});
    assert_eq!((Progress::of(1, &reshard).boards, Progress::of(1, &reshard).boards_done, Progress::of(1, &reshard).units), (1, 0, 200));
    let archive = json!({"results": [{"board": "b", "season": "s1", "status": "complete", "items_written": 3},
        {"board": "b", "season": "s2", "status": "in_progress", "items_written": 2}]});
    assert_eq!((Progress::of(1, &archive).boards, Progress::of(1, &archive).boards_done, Progress::of(1, &archive).units), (2, 1, 5));
    let verify = json!({"boards": [{"board": "a", "differences": 0}, {"board": "b", "differences": 1}]});
    assert_eq!((Progress::of(1, &verify).boards, Progress::of(1, &verify).boards_done), (2, 2));
}

#[test]
fn the_rate_counts_the_journal_passed_since_the_command_started_not_objects_read_again() {
    let progress = Progress { journal_bytes: 1000, left_bytes: 400, ..Progress::default() };
    // The command started with 500 bytes behind the restore: 100 passed since.
    let started = Instant::now() - std::time::Duration::from_secs(10);
    let rate = rates(progress, started, Some(500)).bytes;
    assert!((9.0..=10.1).contains(&rate), "{rate}");
    assert_eq!(rates(progress, started, None).bytes, 0.0);
}

#[test]
fn the_journal_left_over_the_rate_of_reading_it_is_the_time_left() {
    let answer = json!({"status": "in_progress", "boards": [
        {"board": "a", "status": "complete", "journal_bytes": 600, "read_bytes": 100, "left_bytes": 0},
        {"board": "b", "status": "in_progress", "journal_bytes": 400, "read_bytes": 250, "left_bytes": 300}]});
    let progress = Progress::of(1, &answer);
    assert_eq!((progress.journal_bytes, progress.read_bytes, progress.left_bytes), (1000, 350, 300));
    assert_eq!(progress.eta_secs(100.0), Some(3));
    assert_eq!(progress.eta_secs(0.0), None, "nothing read yet: no estimate");
    assert_eq!(Progress::default().eta_secs(100.0), None, "a job with no journal (a reshard) has none");
}
