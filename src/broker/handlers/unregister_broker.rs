//! UnregisterBroker (API 64, `kafka-cluster.sh unregister` / `weir cluster unregister`): a
//! retired broker's registration removed, on the active controller (forwarded there like the
//! other admin requests). Decided by `controller::retire::unregister`: an id that is not
//! registered is BROKER_ID_NOT_REGISTERED; otherwise the broker leaves every ISR and ELR and
//! disappears from Metadata and DescribeCluster. Needs ALTER on the cluster, as Kafka's.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::errors::{self, CommitError};
use crate::broker::shared::Broker;
use crate::controller::retire;

pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: UnregisterBrokerRequest,
) -> UnregisterBrokerResponse {
    let response = UnregisterBrokerResponse::default();
    if !broker.authz(ctx).cluster(Operation::Alter) {
        return response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let id = req.broker_id.0;
    let decided = broker
        .change_metadata_until(Some(ctx.deadline), false, |controller, image| {
            let records = retire::unregister(image, id, &|t| controller.election_config(image, t))?;
            Ok((records, ()))
        })
        .await;
    match decided {
        Ok(()) => {
            tracing::info!(broker = id, "broker unregistered");
            response
        }
        Err(e) => {
            let message = match &e {
                CommitError::Rejected(c) => c.to_string(),
                other => other.to_string(),
            };
            tracing::debug!(broker = id, error = %message, "UnregisterBroker refused");
            response
                .with_error_code(errors::commit(&e).code())
                .with_error_message(Some(StrBytes::from_string(message)))
        }
    }
}
