//! The request layer every handler stands on: what a handler knows of its request
//! ([`RequestContext`]), the one decode of a request's header and body ([`decode`]), response
//! framing ([`encode_response`]), the guard that turns a codec panic into a closed connection
//! (`frame::catch`), and the shape of the table from API key to handler ([`Route`]) that ApiVersions
//! also reads ([`api_versions`]).
//!
//! Nothing here knows the broker, a handler or the connection loop: the table itself lives
//! with the handlers (`handlers::ROUTES`) and is passed in, generic over the state handlers
//! run against.

mod context;
pub mod envelope;
mod frame;
mod request;
mod routes;
mod versions;

pub use context::{ListenerKind, RequestContext};
pub use frame::encode_response;
pub use request::{decode, Decoded, Request};
#[cfg(test)]
pub use routes::find;
pub use routes::{Reply, Route, Serves, Versions};
pub use versions::api_versions;
