//! Broker sessions on the active controller (KIP-631): registration, heartbeats, fencing of
//! silent brokers, controlled shutdown. Pure: the driver passes `now`, the committed image and
//! each topic's election settings; every call returns the records to commit and the reply to
//! send once they are committed (the controller's writes are serial, so the reply computed
//! against the committed image plus these records is what the broker will see).
//!
//! States, as Kafka's `BrokerHeartbeatManager`: FENCED ↔ UNFENCED → CONTROLLED_SHUTDOWN →
//! SHUTDOWN_NOW. A broker is unfenced once it reports a metadata offset at or past its own
//! registration record (it has caught up to being registered) and does not ask to stay
//! fenced; it is fenced again when it asks, or when no heartbeat arrived for
//! `broker.session.timeout.ms` (one broker per tick, as Kafka fences one per controller event).

use std::collections::BTreeMap;

use uuid::Uuid;

use super::election::{self, ElectionConfig, ReplicaLog, ReplicaReports};
use super::image::{BrokerEndpoint, MetadataImage, MetadataRecord, TopicMeta};
use super::ControllerError;

/// A BrokerRegistration request, after the broker layer decoded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationRequest {
    pub id: i32,
    pub incarnation: Uuid,
    pub listeners: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    /// BrokerRegistration v3 `PreviousBrokerEpoch`: the epoch a clean shutdown recorded
    /// (-1: none, so the last stop was unclean or the broker is new).
    pub previous_epoch: i64,
    /// The broker acknowledges only what it has fsynced (`weir.fsync.before.ack`, advertised
    /// as the registration feature [`DURABLE_FEATURE`]): a replica counts toward the high
    /// watermark only up to its fsynced end, so an unclean shutdown cannot have cost it
    /// anything committed, and it keeps its ISR and ELR places (a power loss of every node then
    /// leaves the partitions electable instead of leaderless).
    pub durable: bool,
    /// BrokerRegistration v2 `LogDirs`: the ids of its online log directories (KIP-858).
    pub log_dirs: Vec<Uuid>,
}

/// The BrokerRegistration feature a broker running with `weir.fsync.before.ack=true` lists
/// (level 1). Kafka brokers never send it, so they get Kafka's KIP-966 rule.
pub const DURABLE_FEATURE: &str = "weir.fsync.before.ack";

/// A BrokerHeartbeat request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub id: i32,
    pub epoch: i64,
    /// Kafka's `CurrentMetadataOffset`: the offset of the last metadata record the broker
    /// applied (-1: none), i.e. its image's `applied() - 1`.
    pub metadata_offset: i64,
    pub want_fence: bool,
    pub want_shutdown: bool,
    /// Weir's tagged field: the last epoch and log end of every hosted partition its image
    /// shows awaiting recovery (no leader, ISR and ELR empty), for KIP-966 part 2.
    pub replica_logs: Vec<((Uuid, i32), ReplicaLog)>,
    /// BrokerHeartbeat v1 `OfflineLogDirs`: every directory of its that failed (KIP-858).
    pub offline_dirs: Vec<Uuid>,
    /// KIP-1066 `CordonedLogDirs` (tag 1): its cordoned directories; `None`: not reported.
    pub cordoned_dirs: Option<Vec<Uuid>>,
}

/// What a heartbeat is answered, as of after its records commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatReply {
    pub is_fenced: bool,
    pub in_controlled_shutdown: bool,
    pub should_shut_down: bool,
}

/// Records to commit, and what to answer after they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision<R> {
    pub records: Vec<MetadataRecord>,
    pub reply: R,
}

#[derive(Clone, Debug)]
struct Session {
    /// When the last heartbeat (or the registration) arrived.
    last_contact_ms: i64,
    /// The last committed offset when controlled shutdown was first seen committed: the
    /// broker must have applied this far (its leaderships gone) before it may stop.
    shutdown_offset: Option<i64>,
    /// The highest metadata offset its heartbeats reported applied (-1: none yet).
    metadata_offset: i64,
}

impl Session {
    fn new(now: i64) -> Session {
        Session {
            last_contact_ms: now,
            shutdown_offset: None,
            metadata_offset: -1,
        }
    }
}

/// The active controller's in-memory view of broker liveness. A controller that just became
/// active starts every registered broker's session at its first `tick`, as Kafka does.
#[derive(Clone, Debug)]
pub struct BrokerSessions {
    session_timeout_ms: i64,
    sessions: BTreeMap<i32, Session>,
    /// Replica log reports and leaderless times for recovery elections (KIP-966 part 2).
    reports: ReplicaReports,
}

impl BrokerSessions {
    pub fn new(session_timeout_ms: i64) -> BrokerSessions {
        assert!(session_timeout_ms > 0);
        BrokerSessions {
            session_timeout_ms,
            sessions: BTreeMap::new(),
            reports: ReplicaReports::default(),
        }
    }

    fn live(&self, id: i32, now: i64) -> bool {
        self.sessions
            .get(&id)
            .is_some_and(|s| now - s.last_contact_ms <= self.session_timeout_ms)
    }

    /// BrokerRegistration. A new incarnation while the old one's session is live is refused
    /// (DUPLICATE_BROKER_REGISTRATION: the old process may still run); the same incarnation
    /// registering again keeps its epoch and writes nothing. The broker's epoch is the offset
    /// of the record: read it with [`registered_epoch`] once committed.
    ///
    /// A new incarnation whose `previous_epoch` is not its old registration's epoch shut down
    /// uncleanly (KIP-966): with ELR on, it is removed from every ISR and ELR first, since its
    /// log may have lost what it acknowledged — unless it is `durable` (fsync before ack).
    pub fn register(
        &mut self,
        image: &MetadataImage,
        request: &RegistrationRequest,
        now: i64,
        elections: &dyn Fn(&TopicMeta) -> ElectionConfig,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        if request.id < 0 {
            return Err(ControllerError::InvalidRequest(format!(
                "broker id {} is negative",
                request.id
            )));
        }
        if let Some(existing) = image.broker(request.id) {
            if existing.incarnation == request.incarnation {
                self.touch(request.id, now);
                return Ok(Vec::new());
            }
            // An incarnation whose controlled shutdown was granted (it was fenced as it went)
            // has stopped: its successor registers at once instead of waiting out
            // `broker.session.timeout.ms`. Any other live session — a fenced broker still
            // catching up included — may belong to a process that still runs.
            let shut_down = existing.fenced && existing.in_controlled_shutdown;
            if !shut_down && self.live(request.id, now) {
                return Err(ControllerError::DuplicateBrokerRegistration(format!(
                    "Another broker is registered with that broker id {} (incarnation {}), and its session has not expired.",
                    request.id, existing.incarnation
                )));
            }
        }
        self.sessions.insert(request.id, Session::new(now));
        let unclean = !request.durable
            && image
                .broker(request.id)
                .is_some_and(|old| old.epoch != request.previous_epoch);
        // A durable broker back from an unclean stop keeps its places, but not its leader
        // epochs: its log may end below what its followers hold at that epoch, and leading it
        // again would make them truncate to it (no divergence shows within one epoch).
        let durable_restart = request.durable
            && image
                .broker(request.id)
                .is_some_and(|old| old.epoch != request.previous_epoch);
        let changes = if unclean {
            election::remove_unclean_broker(image, request.id, elections)
        } else if durable_restart {
            election::move_leadership_off(image, request.id, elections)
        } else {
            Vec::new()
        };
        let mut records: Vec<MetadataRecord> = changes
            .into_iter()
            .map(MetadataRecord::PartitionChange)
            .collect();
        records.push(MetadataRecord::RegisterBroker {
            id: request.id,
            incarnation: request.incarnation,
            listeners: request.listeners.clone(),
            rack: request.rack.clone(),
            fenced: true,
            log_dirs: request.log_dirs.clone(),
        });
        Ok(records)
    }

    fn touch(&mut self, id: i32, now: i64) {
        let s = self.sessions.entry(id).or_insert_with(|| Session::new(now));
        s.last_contact_ms = s.last_contact_ms.max(now);
    }

    /// The lowest metadata offset reported by the active brokers other than `except` (Kafka's
    /// `lowestActiveOffset`); `i64::MAX` when there are none. One not heard from in this
    /// leadership term counts as -1.
    fn lowest_active_offset(&self, image: &MetadataImage, except: i32) -> i64 {
        image
            .brokers()
            .filter(|b| b.is_active() && b.id != except)
            .map(|b| self.sessions.get(&b.id).map_or(-1, |s| s.metadata_offset))
            .min()
            .unwrap_or(i64::MAX)
    }

    /// BrokerHeartbeat: keeps the session and moves the broker between states.
    pub fn heartbeat(
        &mut self,
        image: &MetadataImage,
        request: &HeartbeatRequest,
        now: i64,
        elections: &dyn Fn(&TopicMeta) -> ElectionConfig,
    ) -> Result<Decision<HeartbeatReply>, ControllerError> {
        let id = request.id;
        let broker = match image.broker(id) {
            Some(b) if b.epoch == request.epoch => b,
            Some(b) => {
                return Err(ControllerError::StaleBrokerEpoch(format!(
                    "broker {id} heartbeat with epoch {}, but its registration has epoch {}",
                    request.epoch, b.epoch
                )))
            }
            None => {
                return Err(ControllerError::StaleBrokerEpoch(format!(
                    "broker {id} is not registered"
                )))
            }
        };
        self.touch(id, now);
        let session = self.sessions.get_mut(&id).expect("touched above");
        session.metadata_offset = session.metadata_offset.max(request.metadata_offset);
        self.reports
            .report(id, request.epoch, &request.replica_logs);
        let change = |fenced: Option<bool>, shutdown: Option<bool>| MetadataRecord::BrokerChange {
            id,
            epoch: broker.epoch,
            fenced,
            in_controlled_shutdown: shutdown,
        };
        let partition_changes = |changes: Vec<super::image::PartitionChange>| {
            changes.into_iter().map(MetadataRecord::PartitionChange)
        };
        let mut records = Vec::new();
        let mut reply = HeartbeatReply {
            is_fenced: broker.fenced,
            in_controlled_shutdown: broker.in_controlled_shutdown,
            should_shut_down: false,
        };
        // A newly failed directory is decided alone: the state changes below are decided on
        // the image before it, and the next heartbeat makes them against the image after.
        let offline = super::log_dirs::dirs_offline(image, id, &request.offline_dirs, elections);
        if !offline.is_empty() {
            return Ok(Decision {
                records: offline,
                reply,
            });
        }
        if let Some(cordoned) = &request.cordoned_dirs {
            records.extend(super::retire::cordon(image, id, cordoned));
        }
        if broker.fenced {
            if request.want_shutdown {
                // Fenced brokers lead nothing: they may stop at once.
                reply.should_shut_down = true;
            } else if !request.want_fence && request.metadata_offset >= broker.epoch {
                records.push(change(Some(false), None));
                records.extend(partition_changes(election::elect_leaderless(
                    image,
                    Some(id),
                    elections,
                )));
                reply.is_fenced = false;
            }
        } else if broker.in_controlled_shutdown {
            // Granted once it leads nothing and every active broker (and itself) has applied
            // the records that moved its leaderships: until then a client could still be
            // sent to it, or a new leader not know yet that it leads (Kafka's
            // `lowestActiveOffset` rule).
            let session = self.sessions.get_mut(&id).expect("touched above");
            let shutdown_offset = *session.shutdown_offset.get_or_insert(image.applied() - 1);
            let leads = image.partitions_led_by(id).next().is_some();
            reply.should_shut_down = !leads
                && request.metadata_offset >= shutdown_offset
                && self.lowest_active_offset(image, id) >= shutdown_offset;
            if reply.should_shut_down {
                // Granted: fenced as it goes (Kafka fences on SHUTDOWN_NOW), so nothing waits
                // on its session and its next incarnation may register at once.
                records.push(change(Some(true), None));
                reply.is_fenced = true;
            }
        } else if request.want_fence {
            records.extend(partition_changes(election::remove_broker(
                image, id, elections,
            )));
            records.push(change(Some(true), None));
            reply.is_fenced = true;
        } else if request.want_shutdown {
            // Out of every ISR, leaderships moved; granted on a later heartbeat, once the
            // broker has applied that.
            records.push(change(None, Some(true)));
            records.extend(partition_changes(election::remove_broker(
                image, id, elections,
            )));
            reply.in_controlled_shutdown = true;
        }
        Ok(Decision { records, reply })
    }

    /// Keeps a session for exactly the brokers `image` registers: a broker first seen starts
    /// its session at `now` (a new active controller's, as Kafka's), a forgotten one is dropped.
    pub fn sync(&mut self, image: &MetadataImage, now: i64) {
        self.sessions.retain(|id, _| image.broker(*id).is_some());
        for b in image.brokers() {
            self.sessions
                .entry(b.id)
                .or_insert_with(|| Session::new(now));
        }
    }

    /// The brokers with a session, in id order.
    pub fn ids(&self) -> impl Iterator<Item = i32> + '_ {
        self.sessions.keys().copied()
    }

    /// When `tick` would first fence someone: the earliest time an unfenced broker of `image`
    /// has been silent for longer than the session timeout (`None`: nobody to fence).
    pub fn next_expiry(&self, image: &MetadataImage) -> Option<i64> {
        image
            .brokers()
            .filter(|b| !b.fenced)
            .filter_map(|b| self.sessions.get(&b.id))
            .map(|s| {
                s.last_contact_ms
                    .saturating_add(self.session_timeout_ms)
                    .saturating_add(1)
            })
            .min()
    }

    /// Fences the unfenced broker silent the longest, if it has been silent for longer than
    /// the session timeout: out of every ISR, its leaderships moved. At most one per call.
    /// When none is fenced: the recovery elections now due (KIP-966 part 2, for topics with
    /// `unclean.recovery.manager.enabled`), at most [`MAX_PERIODIC_ELECTIONS`](super::MAX_PERIODIC_ELECTIONS).
    pub fn tick(
        &mut self,
        image: &MetadataImage,
        now: i64,
        elections: &dyn Fn(&TopicMeta) -> ElectionConfig,
    ) -> Vec<MetadataRecord> {
        self.sync(image, now);
        let expired = image
            .brokers()
            .filter(|b| !b.fenced)
            .map(|b| (self.sessions[&b.id].last_contact_ms, b.id, b.epoch))
            .filter(|(last, _, _)| now - last > self.session_timeout_ms)
            .min();
        let Some((_, id, epoch)) = expired else {
            return self
                .reports
                .elect(image, now, super::MAX_PERIODIC_ELECTIONS, elections)
                .into_iter()
                .map(MetadataRecord::PartitionChange)
                .collect();
        };
        let mut records: Vec<MetadataRecord> = election::remove_broker(image, id, elections)
            .into_iter()
            .map(MetadataRecord::PartitionChange)
            .collect();
        records.push(MetadataRecord::BrokerChange {
            id,
            epoch,
            fenced: Some(true),
            in_controlled_shutdown: None,
        });
        records
    }
}

/// The epoch of a committed registration of `id` with `incarnation`: the BrokerRegistration
/// reply, read after the record committed.
pub fn registered_epoch(image: &MetadataImage, id: i32, incarnation: Uuid) -> Option<i64> {
    image
        .broker(id)
        .filter(|b| b.incarnation == incarnation)
        .map(|b| b.epoch)
}

#[cfg(test)]
mod tests;
