//! The driver of the connection limits (`quota::connections`): a client connection holds a
//! slot while it is served; refused, it is closed at accept as Kafka closes it. Before a
//! connection is taken, the acceptor waits out the creation rates
//! (`max.connection.creation.rate`, broker-wide and the listener's own); an IP over its
//! `connection_creation_rate` quota has its connection closed after the throttle, unserved.
//! Connections on the controller listener (quorum and inter-node traffic) are not counted and
//! only their listener's own rate applies, so client load never locks the nodes out of each
//! other.
//!
//! The limits are the dynamic broker configs over `server.properties` (this broker's own, then
//! the cluster default, as Kafka layers them), read from the image at each accept: an
//! AlterConfigs takes effect on the next connection.

pub(crate) mod state;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use crate::broker::api::ListenerKind;
use crate::broker::shared::Broker;
use crate::controller::image::quotas::{EntityName, QuotaEntity};
use crate::controller::image::ConfigResource;
use crate::quota::connections::{ConnectionLimits, CreationLimits, Refused};
use state::Counts;

/// A counted connection; dropping it frees the slot.
pub(crate) struct ConnectionSlot {
    counted: Option<(Counts, IpAddr)>,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        if let Some((counts, ip)) = self.counted.take() {
            counts.lock().unwrap().counts.close(ip);
        }
    }
}

/// Why a connection is not served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotServed {
    /// Closed at once (a connection count limit).
    Refused(Refused),
    /// Closed after this long (its IP's `connection_creation_rate`).
    Throttled(Duration),
}

/// The limit keys' values: `configs` (a dynamic level) over `base`. Values were validated
/// when written; one that does not parse leaves the level out.
fn layer(
    (mut counts, mut rates): (ConnectionLimits, CreationLimits),
    configs: &BTreeMap<String, String>,
) -> (ConnectionLimits, CreationLimits) {
    let int = |k: &str| configs.get(k).and_then(|v| v.trim().parse::<u32>().ok());
    if let Some(n) = int("max.connections") {
        counts.max = n;
    }
    if let Some(n) = int("max.connections.per.ip") {
        counts.per_ip = n;
    }
    if let Some(o) = configs.get("max.connections.per.ip.overrides") {
        if let Ok(o) = crate::config::per_ip_overrides(o) {
            counts.overrides = o;
        }
    }
    if let Some(n) = int("max.connection.creation.rate") {
        rates.broker = n as f64;
    }
    for (key, value) in configs {
        let Some(rest) = key.strip_prefix("listener.name.") else {
            continue;
        };
        if let Some(listener) = rest.strip_suffix(".max.connection.creation.rate") {
            if let Ok(n) = value.trim().parse::<u32>() {
                rates
                    .listeners
                    .insert(listener.to_ascii_uppercase(), n as f64);
            }
        }
    }
    (counts, rates)
}

impl Broker {
    /// The connection limits in force: `server.properties`, then the cluster-wide dynamic
    /// configs, then this broker's own.
    fn connection_limits(&self) -> (ConnectionLimits, CreationLimits) {
        let c = &self.config;
        let base = (
            ConnectionLimits {
                max: c.max_connections,
                per_ip: c.max_connections_per_ip,
                overrides: c.max_connections_per_ip_overrides.clone(),
            },
            CreationLimits {
                broker: c.max_connection_creation_rate as f64,
                listeners: c
                    .listener_connection_creation_rates
                    .iter()
                    .map(|(l, &n)| (l.clone(), n as f64))
                    .collect(),
            },
        );
        let image = self.image();
        let cluster = image.resource_configs(&ConfigResource::Broker(String::new()));
        let own = image.resource_configs(&ConfigResource::Broker(c.node_id.to_string()));
        layer(layer(base, cluster), own)
    }

    /// How long the acceptor of `listener` waits before it takes the connection just accepted
    /// (the creation rates; the connection is counted in them).
    pub(crate) fn accept_delay(&self, kind: ListenerKind, listener: &str) -> Duration {
        let (_, limits) = self.connection_limits();
        let now = self.io.clock.monotonic();
        let protected = kind == ListenerKind::Controller;
        let mut quotas = self.connections.lock().unwrap();
        quotas.rates.accept(now, listener, protected, &limits)
    }

    /// A slot for a connection accepted on `kind` from `ip`, or why it is not served.
    pub(crate) fn connection_slot(
        &self,
        kind: ListenerKind,
        listener: &str,
        ip: IpAddr,
    ) -> Result<ConnectionSlot, NotServed> {
        if kind == ListenerKind::Controller {
            return Ok(ConnectionSlot { counted: None });
        }
        let (limits, _) = self.connection_limits();
        let ip_quota = self.ip_connection_rate(ip);
        let now = self.io.clock.monotonic();
        let mut quotas = self.connections.lock().unwrap();
        quotas
            .rates
            .admit_ip(now, ip, ip_quota, (listener, false))
            .map_err(NotServed::Throttled)?;
        quotas.counts.set_limits(limits);
        quotas.counts.open(ip).map_err(NotServed::Refused)?;
        Ok(ConnectionSlot {
            counted: Some((self.connections.clone(), ip)),
        })
    }

    /// The `connection_creation_rate` quota of `ip`: its own, else the default IP's.
    fn ip_connection_rate(&self, ip: IpAddr) -> Option<f64> {
        let image = self.image();
        let quotas = image.quotas();
        if quotas.is_empty() {
            return None;
        }
        let key = "connection_creation_rate";
        let entity = |name| QuotaEntity {
            ip: Some(name),
            ..QuotaEntity::default()
        };
        quotas
            .get(&entity(EntityName::Named(ip.to_string())), key)
            .or_else(|| quotas.get(&entity(EntityName::Default), key))
    }
}
