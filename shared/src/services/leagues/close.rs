//! The close of a league's ended periods, on the `archive` function's scheduled run: each
//! cohort ranked and its zones applied, idle players dropped, the next period's cohorts opened.

use super::*;

impl Leagues {
    /// The ended periods of `board`'s league (ended at least `grace` before `now`, still kept)
    /// that had players (placed, or waiting themselves, or players of the next period waiting
    /// for them) and are not closed yet, oldest first.
    pub async fn unclosed(&self, board: &Board, now: DateTime<Utc>, grace: Duration) -> Result<Vec<Period>, StoreError> {
        let Some(league) = &board.league else { return Ok(Vec::new()) };
        let (keys, _) = self.slot(board).await?;
        let oldest = now - league.period.retention().unwrap_or(Duration::days(35));
        let mut ended: Vec<Period> = Period::containing(league.period, now - grace, board.timezone)
            .before()
            .take_while(|p| p.end.is_some_and(|end| end.with_timezone(&Utc) >= oldest))
            .collect();
        ended.reverse();
        let mut pipe = redis::pipe();
        for period in &ended {
            let next = period.following().map_or_else(String::new, |p| p.id);
            let played = [keys.league_members(&period.id), keys.league_pending(&period.id), keys.league_pending(&next)];
            pipe.hexists(keys.league_results(&period.id), league::CLOSED_FIELD).exists(&played);
        }
        let mut conn = self.store.connection().await?;
        let flags: Vec<u64> = pipe.query_async(&mut conn).await.map_err(StoreError::from)?;
        Ok(ended.into_iter().zip(flags.chunks(2)).filter(|(_, f)| f[0] == 0 && f[1] > 0).map(|(p, _)| p).collect())
    }

    /// Closes every period `unclosed` finds, oldest first, until `deadline`.
    pub async fn close_due(
        &self,
        board: &Board,
        now: DateTime<Utc>,
        grace: Duration,
        deadline: DateTime<Utc>,
    ) -> Result<Vec<CloseReport>, StoreError> {
        let Some(league) = &board.league else { return Ok(Vec::new()) };
        let mut reports = Vec::new();
        for period in self.unclosed(board, now, grace).await? {
            let report = self.close(board, league, &period, now, deadline).await?;
            let done = report.status == "complete";
            reports.push(report);
            if !done {
                break;
            }
        }
        Ok(reports)
    }

    /// Closes one ended period: every cohort of every tier, then opens the next period.
    pub async fn close(
        &self,
        board: &Board,
        league: &League,
        period: &Period,
        now: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> Result<CloseReport, StoreError> {
        let (keys, _) = self.slot(board).await?;
        let mut conn = self.store.connection().await?;
        let mut report = CloseReport {
            board: board.name.clone(),
            period_id: period.id.clone(),
            status: "in_progress",
            cohorts_closed: 0,
            players_placed_after: 0,
        };
        let counts: std::collections::HashMap<String, u32> = conn.hgetall(keys.league_counts(&period.id)).await?;
        let mut cohorts: Vec<(usize, u32)> =
            counts.iter().filter_map(|(t, n)| Some((t.parse().ok()?, *n))).flat_map(|(t, n)| (1..=n).map(move |c| (t, c))).collect();
        cohorts.sort_unstable();
        for (tier, cohort) in cohorts {
            if Utc::now() >= deadline {
                return Ok(report);
            }
            report.cohorts_closed += self.close_cohort(board, league, period, tier, cohort, now).await?;
        }
        if league.idle == league::Idle::Drop {
            while self.drop_idle_step(board, league, period, now).await? {
                if Utc::now() >= deadline {
                    return Ok(report);
                }
            }
        }
        if period.following().is_none() {
            report.status = "complete";
            return Ok(report);
        }
        loop {
            if Utc::now() >= deadline {
                return Ok(report);
            }
            let (placed, left) = self.open_batch(board, league, period, now).await?;
            report.players_placed_after += placed;
            if left == 0 {
                report.status = "complete";
                return Ok(report);
            }
        }
    }

    /// Closes cohort `<tier>:<cohort>` of `period` (close_league.lua): how many cohorts this
    /// call closed (0: closed before).
    /// A tier's last cohort too small to stand alone (`league::joins_the_cohort_before`) is
    /// closed with the cohort before it, as one group, whichever of the two is asked for.
    pub async fn close_cohort(
        &self,
        board: &Board,
        league: &League,
        period: &Period,
        tier: usize,
        cohort: u32,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let (keys, held) = self.slot(board).await?;
        let name = format!("{tier}:{cohort}");
        let mut conn = self.store.write_connection().await?;
        let results_ttl = keys.ttl(results_secs(league), now);
        let entry = serde_json::json!({"kind": "league_close", "at": Stamp(now), "period_id": period.id, "cohort": name}).to_string();
        let group = self.group(&mut conn, &keys, league, period, tier, cohort).await?;
        let names: Vec<String> = group.iter().map(|n| format!("{tier}:{n}")).collect();
        for _ in 0..CLOSE_ATTEMPTS {
            // Each member with their own cohort, the group ranked as one.
            let mut raw = RawCohort { tier: None, cohort: None, members: Vec::new() };
            let mut own = std::collections::HashMap::new();
            for (n, name) in group.iter().zip(&names) {
                let read = read_cohort(&mut conn, &keys, period, CohortOf::Cohort(name), self.fence_at(now)).await?;
                own.extend(read.members.iter().map(|(member, _)| (member.clone(), *n)));
                raw.members.extend(read.members);
            }
            let ranked = ranked(board, held, period, &raw);
            // Off the board at the close (corrected or voided to nothing): no score, whatever a
            // read shows for such a member (0 on a points board).
            let standings: Vec<(String, Option<i64>)> = ranked.iter().map(|(m, c, s)| (m.clone(), c.as_ref().and(*s))).collect();
            let mut outcomes = league::close_cohort(league, tier, cohort, &standings);
            for (member, outcome) in &mut outcomes {
                outcome.cohort = own.get(member).copied().unwrap_or(cohort);
            }
            let closing: Vec<Closing<'_>> = ranked
                .iter()
                .zip(&outcomes)
                .map(|((member, composite, _), (_, outcome))| Closing {
                    member,
                    composite: composite.as_deref(),
                    result: outcome.encode(),
                    next_tier: outcome.next_tier,
                })
                .collect();
            // Tiers are kept for good, except under a shadow replay's TTL cap.
            let ttls = (results_ttl, keys.ttl(0, now));
            match close_cohort(&mut conn, &keys, period, &names.join(","), ttls, &entry, &closing).await? {
                CloseReply::Closed => return Ok(group.len() as u64),
                CloseReply::Done => return Ok(0),
                CloseReply::Stale => continue,
            }
        }
        Err(StoreError::Protocol(format!("league cohort {name} kept changing while it was closed")))
    }

    /// The cohorts closed together with cohort `n` of `tier`: itself, or itself and the tier's
    /// last cohort when that one is too small to stand alone.
    async fn group(
        &self,
        conn: &mut Connection,
        keys: &BoardKeys,
        league: &League,
        period: &Period,
        tier: usize,
        n: u32,
    ) -> Result<Vec<u32>, StoreError> {
        let last: Option<u32> = conn.hget(keys.league_counts(&period.id), tier).await?;
        let Some(last) = last.filter(|last| *last >= 2) else { return Ok(vec![n]) };
        let small = |raw: RawCohort| league::joins_the_cohort_before(raw.members.len(), league.cohort_size);
        let pair = if n == last && small(read_cohort(conn, keys, period, CohortOf::Cohort(&format!("{tier}:{last}")), None).await?) {
            [n - 1, n]
        } else if n + 1 == last && small(read_cohort(conn, keys, period, CohortOf::Cohort(&format!("{tier}:{last}")), None).await?) {
            [n, n + 1]
        } else {
            return Ok(vec![n]);
        };
        // One of the two closed alone already (the last was larger then, and a ban shrank it
        // since): the other closes alone too, never left unclosed.
        let marks: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(keys.league_results(&period.id))
            .arg(pair.map(|c| format!("{}{tier}:{c}", league::COHORT_CLOSED_PREFIX)).to_vec())
            .query_async(conn)
            .await?;
        Ok(match marks.as_slice() {
            [Some(_), None] => vec![pair[1]],
            [None, Some(_)] => vec![pair[0]],
            _ => pair.to_vec(),
        })
    }

    /// One step of the drop of `ended`'s idle players (`Idle::Drop`): whether players are left.
    pub async fn drop_idle_step(&self, board: &Board, league: &League, ended: &Period, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let (keys, _) = self.slot(board).await?;
        let mut conn = self.store.write_connection().await?;
        let entry = serde_json::json!({"kind": "league_idle", "at": Stamp(now), "period_id": ended.id}).to_string();
        drop_idle(&mut conn, &keys, league, ended, keys.ttl(results_secs(league), now), &entry).await
    }

    /// Places one batch of the players waiting for `ended`'s close in the period after it
    /// (open_league.lua): (placed, still waiting).
    pub async fn open_batch(&self, board: &Board, league: &League, ended: &Period, now: DateTime<Utc>) -> Result<(u64, u64), StoreError> {
        let Some(next) = ended.following() else { return Ok((0, 0)) };
        let (keys, _) = self.slot(board).await?;
        let mut conn = self.store.write_connection().await?;
        let ttls = (keys.ttl(next.ttl_secs(now), now), keys.ttl(results_secs(league), now));
        let entry = serde_json::json!({"kind": "league_open", "at": Stamp(now), "period_id": ended.id}).to_string();
        let before: u64 = conn.zcard(keys.league_pending(&next.id)).await?;
        let left = open_next(&mut conn, &keys, league, ended, &next, OPEN_BATCH, ttls, &entry).await?;
        Ok((before.saturating_sub(left), left))
    }
}
