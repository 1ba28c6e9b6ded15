//! A queue message (docs/queue.md): the body an HTTP write route takes. Without `kind` (or
//! with `"kind": "event"`) it is an activity event as `POST /v1/events` takes it; `"kind":
//! "score"` with `board` is a score submission as `POST /v1/boards/{board}/scores` takes it;
//! `"kind": "sign_in"` is a sign-in as `POST /v1/sign-ins` takes it.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::period::EventWindow;
use super::scores::Submission;
use super::scoring::Event;
use super::sign_in::SignInRequest;

#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Event(Event),
    Score { board: String, submission: Submission },
    SignIn(SignInRequest),
}

/// A body that can never be applied, whatever happens next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

impl Message {
    pub fn parse(body: &str) -> Result<Self, Malformed> {
        let value: Value = serde_json::from_str(body).map_err(|error| Malformed(format!("the body is not JSON: {error}")))?;
        let Value::Object(mut object) = value else {
            return Err(Malformed("a message is a JSON object".into()));
        };
        match take_text(&mut object, "kind")?.as_deref().unwrap_or("event") {
            "event" => shape(object, "an event").map(Message::Event),
            "score" => {
                let board = take_text(&mut object, "board")?.ok_or_else(|| Malformed("a score message names its board".into()))?;
                Ok(Message::Score { board, submission: shape(object, "a score submission")? })
            }
            "sign_in" => shape(object, "a sign-in").map(Message::SignIn),
            other => Err(Malformed(format!("unknown kind {:?}: event, score or sign_in", super::ids::loggable(other)))),
        }
    }

    /// Whether the message names its own time: an event's or a score's `occurred_at`, a
    /// sign-in's `date`.
    pub fn timed(&self) -> bool {
        match self {
            Message::Event(event) => event.occurred_at.is_some(),
            Message::Score { submission, .. } => submission.occurred_at.is_some(),
            Message::SignIn(request) => request.date.is_some(),
        }
    }

    pub fn event_id(&self) -> &str {
        match self {
            Message::Event(event) => &event.event_id,
            Message::Score { submission, .. } => &submission.event_id,
            Message::SignIn(request) => &request.event_id,
        }
    }
}

/// When a queue message's write happens (docs/queue.md#when-a-message-happened): one that
/// names its time is applied `now` (its time is checked against the event window, as over
/// HTTP); one that does not happened when SQS took it (`sent`, its `SentTimestamp`, on SQS's
/// clock, never later than `now`), which decides its period, its day and its place among equal
/// scores, as long as that is within the window's grace; later than that (a backlog), or
/// without a `SentTimestamp`, it counts at `now`, never refused for lateness.
pub fn write_time(timed: bool, sent: Option<DateTime<Utc>>, now: DateTime<Utc>, window: &EventWindow) -> DateTime<Utc> {
    match sent {
        Some(sent) if !timed && sent >= now - window.grace => sent.min(now),
        _ => now,
    }
}

/// Removes `field` from the message; it must be a string when present.
fn take_text(object: &mut Map<String, Value>, field: &str) -> Result<Option<String>, Malformed> {
    match object.remove(field) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(Malformed(format!("{field} must be a string"))),
    }
}

fn shape<T: DeserializeOwned>(object: Map<String, Value>, what: &str) -> Result<T, Malformed> {
    serde_json::from_value(Value::Object(object)).map_err(|error| Malformed(format!("not {what}: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_parses_to_what_its_route_takes() {
        let event = Message::parse(r#"{"event_id":"e1","user_id":"u1","action":"comment","target":"a1"}"#).unwrap();
        assert!(matches!(&event, Message::Event(e) if e.action == "comment" && e.active));
        assert_eq!(Message::parse(r#"{"kind":"event","event_id":"e1","user_id":"u1","action":"qa"}"#).unwrap().event_id(), "e1");
        let score = Message::parse(r#"{"kind":"score","board":"high-scores","event_id":"s1","user_id":"u1","score":42}"#).unwrap();
        assert!(matches!(&score, Message::Score { board, submission } if board == "high-scores" && submission.score == 42));
        let sign_in = Message::parse(r#"{"kind":"sign_in","event_id":"g1","user_id":"u1"}"#).unwrap();
        assert!(matches!(sign_in, Message::SignIn(r) if r.user_id == "u1"));
    }

    proptest::proptest! {
        /// An untimed message happened when SQS took it while that is within the grace; a timed
        /// one, or one sent longer ago, counts now; never in the future, never refused.
        #[test]
        fn a_message_happens_when_sqs_took_it_within_the_grace(timed: bool, ago_ms in -120_000i64..3_600_000) {
            let window = EventWindow::default();
            let now = DateTime::from_timestamp(1_795_312_800, 0).unwrap();
            let sent = now - chrono::Duration::milliseconds(ago_ms);
            let at = write_time(timed, Some(sent), now, &window);
            let within = ago_ms <= window.grace.num_milliseconds();
            let in_the_future = ago_ms < 0;
            let expected = if timed || !within || in_the_future { now } else { sent };
            proptest::prop_assert_eq!(at, expected);
            proptest::prop_assert_eq!(write_time(timed, None, now, &window), now);
        }
    }

    #[test]
    fn anything_else_is_malformed_with_a_reason() {
        for (body, says) in [
            ("not json", "not JSON"),
            ("[1]", "JSON object"),
            (r#"{"kind":"bonus","event_id":"e"}"#, "unknown kind"),
            (r#"{"kind":7}"#, "kind must be a string"),
            (r#"{"kind":"score","event_id":"s1","user_id":"u1","score":1}"#, "names its board"),
            (r#"{"event_id":"e1","user_id":"u1"}"#, "not an event"),
            (r#"{"event_id":"e1","user_id":"u1","action":"qa","bonus":1}"#, "unknown field"),
        ] {
            let Malformed(reason) = Message::parse(body).unwrap_err();
            assert!(reason.contains(says), "{body}: {reason}");
        }
    }
}
