//! Where rank-change notifications go (docs/notifications.md): a `Bus` takes a board's events
//! in order; `EventBridgeBus` (cargo feature `eventbridge`) sends them with `PutEvents`.

use crate::domain::notify::Detail;

/// A bus that refused or failed to take events: the drain sends them again on its next run
/// (consumers deduplicate on `detail.id`).
#[derive(Debug, thiserror::Error)]
#[error("event bus: {0}")]
pub struct BusError(pub String);

/// What a `put` did not deliver: the events the bus did not take (their indexes in what it was
/// given, in order), and why. Those it took are not sent again.
#[derive(Debug, thiserror::Error)]
#[error("{error} ({} not taken)", .events.len())]
pub struct Unsent {
    pub events: Vec<usize>,
    pub error: BusError,
}

impl Unsent {
    /// Events `from..len` not taken (a call that failed as a whole, and those after it).
    pub fn from(from: usize, len: usize, error: BusError) -> Self {
        Self { events: (from..len).collect(), error }
    }
}

/// Takes events in the order given; `Ok` only once every one of them is accepted, else which
/// were not.
pub trait Bus: Send + Sync {
    fn put(&self, events: &[Detail]) -> impl std::future::Future<Output = Result<(), Unsent>> + Send;
}

/// The detail type of a tournament instance's results (docs/tournaments.md#the-end).
pub const TOURNAMENT_ENDED: &str = "Standings Tournament Ended";

/// Takes a tournament instance's result pages (each one event's detail, JSON), in order; `Ok`
/// once every one is accepted.
pub trait Announce: Send + Sync {
    fn announce(&self, pages: &[String]) -> impl std::future::Future<Output = Result<(), BusError>> + Send;
}

/// `PutEvents` takes at most this many entries a call.
pub const PUT_EVENTS_MAX: usize = 10;

#[cfg(feature = "eventbridge")]
mod eventbridge {
    use std::time::Duration;

    use aws_sdk_eventbridge::Client;
    use aws_sdk_eventbridge::types::PutEventsRequestEntry;

    use super::*;
    use crate::domain::notify::{DETAIL_TYPE, SOURCE};

    /// The bus named by `STANDINGS_EVENT_BUS` (a name or an ARN).
    #[derive(Clone)]
    pub struct EventBridgeBus {
        client: Client,
        bus: String,
    }

    impl EventBridgeBus {
        pub fn new(client: Client, bus: impl Into<String>) -> Self {
            Self { client, bus: bus.into() }
        }

        pub fn client(&self) -> &Client {
            &self.client
        }

        pub fn name(&self) -> &str {
            &self.bus
        }
    }

    /// An EventBridge client, up to 3 attempts of 10 s each (`AWS_ENDPOINT_URL_EVENTBRIDGE`
    /// points it at moto_server locally).
    pub async fn eventbridge_client() -> Client {
        Client::new(&crate::runtime::aws::sdk_config(3, Duration::from_secs(10)).await)
    }

    impl Bus for EventBridgeBus {
        /// One `PutEvents` per `PUT_EVENTS_MAX`, in order; a call with a failed entry stops the
        /// rest, and names the entries it did not take (EventBridge answers each entry on its own:
        /// `FailedEntryCount`), so only those and the later ones are sent again.
        async fn put(&self, events: &[Detail]) -> Result<(), Unsent> {
            for (n, chunk) in events.chunks(PUT_EVENTS_MAX).enumerate() {
                let first = n * PUT_EVENTS_MAX;
                let entries = chunk
                    .iter()
                    .map(|detail| {
                        PutEventsRequestEntry::builder()
                            .event_bus_name(&self.bus)
                            .source(SOURCE)
                            .detail_type(DETAIL_TYPE)
                            .detail(serde_json::to_string(detail).expect("a detail serializes"))
                            .build()
                    })
                    .collect::<Vec<_>>();
                let sent = self.client.put_events().set_entries(Some(entries)).send().await.map_err(|e| {
                    Unsent::from(first, events.len(), BusError(aws_sdk_eventbridge::error::DisplayErrorContext(e).to_string()))
                })?;
                if sent.failed_entry_count() > 0 {
                    let why = sent.entries().iter().find_map(|entry| entry.error_code().map(str::to_owned)).unwrap_or_default();
                    let error = BusError(format!("{} of {} entries refused ({why})", sent.failed_entry_count(), chunk.len()));
                    // Entries answer in the request's order; an entry without an answer was not taken.
                    let answers = sent.entries();
                    let refused =
                        (0..chunk.len()).filter(|&i| answers.get(i).is_none_or(|a| a.event_id().is_none() || a.error_code().is_some()));
                    let events_left = (first + chunk.len())..events.len();
                    return Err(Unsent { events: refused.map(|i| first + i).chain(events_left).collect(), error });
                }
            }
            Ok(())
        }
    }
}

#[cfg(feature = "eventbridge")]
pub use eventbridge::{EventBridgeBus, eventbridge_client};

#[cfg(feature = "eventbridge")]
impl Announce for EventBridgeBus {
    /// One `PutEvents` a page: a page is sized to fill most of a request's 256 KB alone.
    async fn announce(&self, pages: &[String]) -> Result<(), BusError> {
        use aws_sdk_eventbridge::types::PutEventsRequestEntry;
        for page in pages {
            let entry = PutEventsRequestEntry::builder()
                .event_bus_name(self.name())
                .source(crate::domain::notify::SOURCE)
                .detail_type(TOURNAMENT_ENDED)
                .detail(page)
                .build();
            let sent = self
                .client()
                .put_events()
                .entries(entry)
                .send()
                .await
                .map_err(|e| BusError(aws_sdk_eventbridge::error::DisplayErrorContext(e).to_string()))?;
            if sent.failed_entry_count() > 0 {
                let why = sent.entries().iter().find_map(|entry| entry.error_code().map(str::to_owned)).unwrap_or_default();
                return Err(BusError(format!("a results page refused ({why})")));
            }
        }
        Ok(())
    }
}
