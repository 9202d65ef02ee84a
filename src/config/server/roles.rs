//! Kafka's KRaft consistency rules between roles, listeners and the quorum.

use std::collections::BTreeMap;

use super::super::{invalid, ConfigError, Endpoint};
use super::ServerConfig;

impl ServerConfig {
    /// Kafka's KRaft consistency rules between roles, listeners and the quorum.
    pub(super) fn check_roles(&self, props: &BTreeMap<String, String>) -> Result<(), ConfigError> {
        // Errors quote what the user wrote, or the effective value when the key was left out.
        let fail = |key: &str, effective: String, reason: String| {
            let value = props.get(key).cloned().unwrap_or(effective);
            Err(invalid(key, &value, reason))
        };
        let listeners = || join(&self.listeners);
        let is_controller_listener =
            |e: &&Endpoint| self.controller_listener_names.contains(&e.listener_name);
        let voter_ids: Vec<i32> = self.controller_quorum_voters.iter().map(|v| v.id).collect();
        let has_quorum = !voter_ids.is_empty();
        let has_static_voters = voter_ids.iter().any(|&id| id >= 0);
        let node = self.node_id;

        if self.is_controller() {
            if has_quorum && !self.listeners.iter().any(|e| is_controller_listener(&e)) {
                let reason = "must name a listener from 'listeners' when process.roles \
                              contains controller and a quorum is configured";
                let names = self.controller_listener_names.join(",");
                return fail("controller.listener.names", names, reason.into());
            }
            if has_static_voters && !voter_ids.contains(&node) {
                let reason = format!(
                    "must include this node (node.id {node}) when process.roles contains controller"
                );
                return fail("controller.quorum.voters", String::new(), reason);
            }
        }
        if self.is_controller() && !self.is_broker() {
            if let Some(e) = self.listeners.iter().find(|e| !is_controller_listener(e)) {
                let reason = format!(
                    "listener '{}' is not in controller.listener.names, and a node with \
                     process.roles=controller runs only controller listeners",
                    e.listener_name
                );
                return fail("listeners", listeners(), reason);
            }
        }
        if self.is_broker() && !self.is_controller() {
            if !has_quorum {
                let reason = "process.roles=broker needs controller.quorum.voters or \
                              controller.quorum.bootstrap.servers";
                return fail("controller.quorum.voters", String::new(), reason.into());
            }
            if voter_ids.contains(&node) {
                let reason = format!(
                    "must not include this node (node.id {node}) when process.roles=broker"
                );
                return fail("controller.quorum.voters", String::new(), reason);
            }
            if let Some(e) = self.listeners.iter().find(is_controller_listener) {
                let reason = format!(
                    "controller listener '{}' is not allowed when process.roles=broker",
                    e.listener_name
                );
                return fail("listeners", listeners(), reason);
            }
        }
        if self.is_broker() {
            if self.listeners.iter().all(|e| is_controller_listener(&e)) {
                let reason = "must contain a listener that is not a controller listener when \
                              process.roles contains broker";
                return fail("listeners", listeners(), reason.into());
            }
            if self
                .advertised_listeners
                .iter()
                .all(|e| is_controller_listener(&e))
            {
                let reason = "must contain a listener that is not a controller listener when \
                              process.roles contains broker";
                return fail("advertised.listeners", String::new(), reason.into());
            }
            let name = &self.inter_broker_listener_name;
            let advertised = self
                .advertised_listeners
                .iter()
                .any(|e| &e.listener_name == name);
            if !advertised || self.controller_listener_names.contains(name) {
                let reason =
                    format!("'{name}' must be a non-controller listener in advertised.listeners");
                return fail("inter.broker.listener.name", name.clone(), reason);
            }
        }
        Ok(())
    }
}

fn join<T: ToString>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}
