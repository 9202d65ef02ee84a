//! What the group and transaction coordinators share about their internal topics
//! (`__consumer_offsets`, `__transaction_state`): made on first use through the active
//! controller, and a key's coordinator is the leader of its partition there.

use crate::broker::{errors::CommitError, shared::Broker};
use crate::controller::{ControllerError, NewTopic};

impl Broker {
    /// Creates the internal topic `new` through the controller; already there is success.
    pub(crate) async fn create_internal_topic(&self, new: NewTopic) -> Result<(), String> {
        let name = new.name.clone();
        match crate::broker::handlers::inter_node::forward::create_topic(self, new, false).await {
            Ok(()) => {
                tracing::info!("created {name}");
                Ok(())
            }
            Err(CommitError::Rejected(ControllerError::TopicAlreadyExists(_))) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Node `node`'s advertised endpoint on `listener` (this node's from its own listeners).
    pub(crate) fn endpoint_on(&self, node: i32, listener: &str) -> Option<(String, u16)> {
        if node == self.config.node_id {
            return self
                .registered_listeners()
                .into_iter()
                .find(|e| e.name == listener)
                .map(|e| (e.host, e.port));
        }
        let image = self.image();
        let e = image.broker(node)?.endpoint(listener)?;
        Some((e.host.clone(), e.port))
    }

    /// The leader of partition `index` of the internal topic `topic`, with its client endpoint
    /// (Kafka's `KafkaApis.getCoordinator`): Err (COORDINATOR_NOT_AVAILABLE to the client)
    /// while the topic is not in the image or the partition has no reachable leader.
    pub(crate) fn internal_partition_leader(
        &self,
        topic: &str,
        index: i32,
    ) -> Result<(i32, String, u16), String> {
        let image = self.image();
        let Some(t) = image.topic(topic) else {
            return Err(format!("{topic} is not ready"));
        };
        let leader = image
            .partition(t.id, index)
            .map_or(crate::controller::NO_LEADER, |p| p.leader);
        if leader < 0 {
            return Err(format!("{topic}-{index} has no leader"));
        }
        if leader == self.config.node_id {
            let (host, port) = self.advertised.read().unwrap().clone();
            return Ok((leader, host, port));
        }
        let listener = crate::broker::handlers::topics::metadata::client_listener(self);
        image
            .broker(leader)
            .filter(|b| !b.fenced)
            .and_then(|b| b.endpoint(&listener))
            .map(|e| (leader, e.host.clone(), e.port))
            .ok_or_else(|| format!("the leader {leader} of {topic}-{index} is not reachable"))
    }
}
