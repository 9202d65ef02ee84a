//! The shape of the table from API key to handler. The table (`handlers::ROUTES`) says for
//! each API the versions served, the listeners that serve it and the function that answers
//! it; the decoder finds a request's route in it and ApiVersions advertises from it.

use std::future::Future;
use std::pin::Pin;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use super::context::{ListenerKind, RequestContext};

/// A handler's answer: `Ok(None)` sends nothing (acks=0), `Err` closes the connection.
pub type Reply<'a> =
    Pin<Box<dyn Future<Output = Result<Option<ResponseKind>, String>> + Send + 'a>>;

/// Answers one decoded request against the state `B` (the broker).
pub type Handler<B> = for<'a> fn(&'a B, &'a RequestContext, RequestKind) -> Reply<'a>;

/// The versions a route serves.
#[derive(Clone, Copy, Debug)]
pub enum Versions {
    /// These, inclusive (within what the codec decodes).
    Range(i16, i16),
    /// Every version the codec decodes (inter-node RPCs, whose peers are Weir or Kafka).
    Codec,
}

/// The listeners a route serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serves {
    Both,
    ClientOnly,
    ControllerOnly,
}

pub struct Route<B> {
    pub key: ApiKey,
    pub versions: Versions,
    pub serves: Serves,
    /// Listed by ApiVersions (an API may be served without being advertised).
    pub advertised: bool,
    pub run: Handler<B>,
}

impl<B> Route<B> {
    /// The versions served, inclusive.
    pub fn range(&self) -> (i16, i16) {
        match self.versions {
            Versions::Range(min, max) => (min, max),
            Versions::Codec => {
                let codec = self.key.valid_versions();
                (codec.min, codec.max)
            }
        }
    }

    pub fn serves(&self, listener: ListenerKind) -> bool {
        match (self.serves, listener) {
            (Serves::Both, _) => true,
            (Serves::ClientOnly, l) => l == ListenerKind::Client,
            (Serves::ControllerOnly, l) => l == ListenerKind::Controller,
        }
    }
}

/// The route that answers `key` at `version` on `listener`: the first one serving that
/// listener and key, if it serves that version.
pub fn find<B>(
    routes: &[Route<B>],
    listener: ListenerKind,
    key: ApiKey,
    version: i16,
) -> Option<&Route<B>> {
    let route = routes.iter().find(|r| r.key == key && r.serves(listener))?;
    let (min, max) = route.range();
    (min..=max).contains(&version).then_some(route)
}
