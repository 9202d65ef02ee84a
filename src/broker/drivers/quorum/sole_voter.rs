//! A single node (no `controller.quorum.voters`, or only itself) is a quorum of one voter: it
//! elects itself at once, and once its image holds the whole log it registers itself through
//! the same broker-session rules a cluster's controller applies (a new incarnation, registered
//! fenced, then unfenced by a heartbeat that has seen its own registration) unless the image
//! already has it unfenced at the same endpoints, and registers on itself the partitions of a
//! metadata log written before partitions had their own records. It runs no session loop with
//! itself afterwards: it is the only broker, nobody fences it.

use std::io;

use uuid::Uuid;

use crate::broker::{errors::CommitError, shared::Broker};
use crate::controller::brokers::{BrokerSessions, HeartbeatRequest, RegistrationRequest};
use crate::controller::BrokerEndpoint;

/// Kafka's default `broker.session.timeout.ms`; a single node never times itself out, but the
/// session rules need one.
const SESSION_TIMEOUT_MS: i64 = 9000;

impl Broker {
    /// The endpoints a registration announces: each client listener as clients must reach it
    /// (advertised host, bound port). Known once the listeners are bound.
    pub fn registered_listeners(&self) -> Vec<BrokerEndpoint> {
        let (host, port) = self.advertised.read().unwrap().clone();
        self.config
            .broker_endpoints()
            .first()
            .map(|e| BrokerEndpoint {
                name: e.listener_name.clone(),
                host,
                port,
            })
            .into_iter()
            .chain(self.more_advertised.read().unwrap().iter().cloned())
            .collect()
    }

    /// Waits until the sole voter leads and has applied its log (the whole of it: nobody else
    /// could have written). Fails if the quorum stops first (a storage failure).
    pub(crate) async fn wait_sole_voter_active(&self) -> io::Result<()> {
        let mut changes = self.quorum.controller_changes();
        let mut offline = std::pin::pin!(self.storage_offline());
        loop {
            if changes.borrow_and_update().active {
                return Ok(());
            }
            tokio::select! {
                biased;
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(io::Error::other("the metadata quorum stopped"));
                    }
                }
                reason = &mut offline => return Err(io::Error::other(reason)),
            }
        }
    }

    pub(crate) async fn register_single_node(&self) -> io::Result<()> {
        let node = self.config.node_id;
        let now = self.io.clock.wall_ms();
        let storage = |e: CommitError| match e {
            CommitError::Storage(e) => e,
            other => io::Error::other(other.to_string()),
        };
        // Already registered, unfenced, with these endpoints: nothing to write. A single node
        // has no peer that could tell its incarnations apart, and a start that writes nothing
        // cannot be cut short by a crash half-way through its writes.
        {
            // A fresh log starts with `weir format`'s bootstrap records.
            let _writer = self.metadata.lock().await;
            self.commit_bootstrap_records().await.map_err(storage)?;
        }
        let registered = self.image().broker(node).is_some_and(|b| {
            !b.fenced
                && !b.in_controlled_shutdown
                && b.listeners == self.registered_listeners()
                && b.log_dirs == self.dirs.ids()
        });
        if registered {
            return self
                .change_metadata(false, |controller, image| {
                    Ok((controller.register_legacy_partitions(image, node), ()))
                })
                .await
                .map_err(storage);
        }
        let request = RegistrationRequest {
            id: node,
            incarnation: Uuid::from_u64_pair(self.io.rng.next_u64(), self.io.rng.next_u64()),
            listeners: self.registered_listeners(),
            rack: self.config.broker_rack.clone(),
            // A single node has no other replica to prefer: its restarts never count as
            // unclean (that would only leave its partitions leaderless).
            previous_epoch: self.image().broker(node).map_or(-1, |b| b.epoch),
            durable: self.config.fsync_before_ack,
            log_dirs: self.dirs.ids(),
        };
        let sessions = std::sync::Mutex::new(BrokerSessions::new(SESSION_TIMEOUT_MS));
        self.change_metadata(false, |controller, image| {
            let mut records = controller.register_legacy_partitions(image, node);
            records.extend(
                sessions
                    .lock()
                    .unwrap()
                    .register(image, &request, now, &|t| {
                        controller.election_config(image, t)
                    })?,
            );
            Ok((records, ()))
        })
        .await
        .map_err(storage)?;
        self.change_metadata(false, |controller, image| {
            let epoch = image
                .broker(node)
                .map(|b| b.epoch)
                .expect("registered just now");
            let heartbeat = HeartbeatRequest {
                id: node,
                epoch,
                metadata_offset: image.applied() - 1,
                want_fence: false,
                want_shutdown: false,
                replica_logs: Vec::new(),
                offline_dirs: Vec::new(),
                cordoned_dirs: None,
            };
            let decision = sessions
                .lock()
                .unwrap()
                .heartbeat(image, &heartbeat, now, &|t| {
                    controller.election_config(image, t)
                })?;
            assert!(!decision.reply.is_fenced, "a single node unfences itself");
            Ok((decision.records, ()))
        })
        .await
        .map_err(storage)
    }
}
