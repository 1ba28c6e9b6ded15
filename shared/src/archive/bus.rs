//! Where rank-change notifications go (docs/notifications.md): a `Bus` takes a board's events
//! in order; `EventBridgeBus` (cargo feature `eventbridge`) sends them with `PutEvents`.

use crate::domain::notify::Detail;

/// A bus that refused or failed to take events: the drain sends them again on its next run
/// (consumers deduplicate on `detail.id`).
#[derive(Debug, thiserror::Error)]
#[error("event bus: {0}")]
pub struct BusError(pub String);

/// Takes events in the order given; `Ok` only once every one of them is accepted.
pub trait Bus: Send + Sync {
    fn put(&self, events: &[Detail]) -> impl std::future::Future<Output = Result<(), BusError>> + Send;
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
        /// rest, so a retry resends from a point no later event has passed.
        async fn put(&self, events: &[Detail]) -> Result<(), BusError> {
            for chunk in events.chunks(PUT_EVENTS_MAX) {
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
                let sent = self
                    .client
                    .put_events()
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(|e| BusError(aws_sdk_eventbridge::error::DisplayErrorContext(e).to_string()))?;
                if sent.failed_entry_count() > 0 {
                    let why = sent.entries().iter().find_map(|entry| entry.error_code().map(str::to_owned)).unwrap_or_default();
                    return Err(BusError(format!("{} of {} entries refused ({why})", sent.failed_entry_count(), chunk.len())));
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
