//! ApiVersions from the route table: only what is served is advertised (clients choose
//! features by it: kafka-python refuses idempotence without InitProducerId, librdkafka skips
//! compression without FindCoordinator).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsResponse, ResponseKind};

use super::context::ListenerKind;
use super::routes::{Route, Serves};

fn advertise<B>(route: &Route<B>) -> ApiVersion {
    let (min, max) = route.range();
    let codec = route.key.valid_versions();
    // Never advertise past what the codec can decode.
    assert!(
        codec.min <= min && max <= codec.max,
        "{:?} beyond codec range",
        route.key
    );
    ApiVersion::default()
        .with_api_key(route.key as i16)
        .with_min_version(min)
        .with_max_version(max)
}

/// The client listener's APIs, in table order.
fn client_apis<B>(routes: &[Route<B>]) -> Vec<ApiVersion> {
    routes
        .iter()
        .filter(|r| r.advertised && r.serves(ListenerKind::Client))
        .map(advertise)
        .collect()
}

/// ApiVersions on `listener`. The controller listener lists what clients get too (forwarded
/// requests arrive on it), then the inter-node APIs a broker asks of the controller (an API
/// already listed keeps the client's range).
pub fn api_versions<B>(routes: &[Route<B>], listener: ListenerKind) -> ApiVersionsResponse {
    let mut keys = client_apis(routes);
    if listener == ListenerKind::Controller {
        for route in routes {
            let listed = keys.iter().any(|k| k.api_key == route.key as i16);
            if route.advertised && route.serves == Serves::ControllerOnly && !listed {
                keys.push(advertise(route));
            }
        }
    }
    ApiVersionsResponse::default().with_api_keys(keys)
}

/// The answer to an ApiVersions version we do not speak: encoded as v0 so any client reads it,
/// with the versions we do speak, so it can retry.
pub fn unsupported_api_versions<B>(routes: &[Route<B>]) -> ResponseKind {
    ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(client_apis(routes)),
    )
}
