//! Moving replicas between this broker's log directories (AlterReplicaLogDirs, KIP-113 and
//! KIP-858: Kafka's `ReplicaAlterLogDirsThread`). Every decision is the core's,
//! `replica::dir_move`; this driver does its I/O:
//! - [`Broker::request_dir_move`] (the handler) steps the core and queues its actions;
//! - [`mover_loop`] carries them out one at a time ([`steps`]): the future log
//!   `<topic>-<p>.<id>-future` in the destination, copies from the current log on this broker,
//!   and the swap, under the partition's flush and log-start gates and its lock, so no append,
//!   flush, truncation or DeleteRecords comes between the last check and the swap;
//! - [`recovery`]: what a crash mid-move leaves, found at start.
//!
//! The throttle is the dynamic broker config `replica.alter.log.dirs.io.max.bytes.per.second`
//! (this broker's, else the cluster default; unlimited when unset), read before each round.
//! The controller learns the new directory from the heartbeat path's AssignReplicasToDirs,
//! which reports every replica whose directory the image does not show yet.

pub(crate) mod recovery;
pub(crate) mod state;
mod steps;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::broker::shared::Broker;
use crate::controller::ConfigResource;
use crate::quota::replication;

/// Kafka's key for the intra-broker copy throttle (bytes/s).
pub const ALTER_LOG_DIRS_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";

/// How long the task sleeps with nothing to wait for (it is woken by requests anyway; the
/// throttle's config is read again after it).
const IDLE: Duration = Duration::from_secs(1);

impl Broker {
    /// AlterReplicaLogDirs for `topic`-`index` hosted here, into the directory `dest` (online,
    /// not cordoned: the handler checked). Its own directory cancels a move under way.
    pub(crate) fn request_dir_move(&self, topic: &str, index: i32, dest: Uuid) {
        let Some((current, _)) = self.dirs.dir_of(topic, index) else {
            return;
        };
        let now = self.io.clock.monotonic();
        let actions = self.dir_moves.core.lock().unwrap().request(
            now,
            (topic.to_string(), index),
            dest,
            current,
        );
        self.dir_moves.enqueue(actions);
    }

    /// The throttle of intra-broker moves: this broker's dynamic config, else the cluster
    /// default.
    fn alter_log_dirs_rate(&self) -> Option<u64> {
        let image = self.image();
        let own = image.resource_configs(&ConfigResource::Broker(self.config.node_id.to_string()));
        let default = image.resource_configs(&ConfigResource::Broker(String::new()));
        replication::parse_rate(
            own.get(ALTER_LOG_DIRS_RATE)
                .or_else(|| default.get(ALTER_LOG_DIRS_RATE))
                .map(String::as_str),
        )
    }
}

/// The mover's task: carries out the queued actions and the copies the core lets start,
/// sleeping until the core's next deadline or a request.
pub(crate) async fn mover_loop(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    let mut futures: BTreeMap<u64, steps::Future> = BTreeMap::new();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let now = broker.io.clock.monotonic();
        let limit = broker.alter_log_dirs_rate();
        let (mut actions, deadline) = {
            let mut core = broker.dir_moves.core.lock().unwrap();
            core.set_limit(limit);
            let queued: Vec<_> = broker.dir_moves.queue.lock().unwrap().drain(..).collect();
            let mut actions = queued;
            actions.extend(core.poll(now));
            (actions, core.next_deadline())
        };
        if actions.is_empty() {
            let wait = deadline.map_or(IDLE, |d| d.saturating_sub(now).min(IDLE));
            tokio::select! {
                biased;
                _ = shutdown.changed() => return,
                _ = broker.dir_moves.changed.notified() => {}
                _ = broker.io.clock.sleep(wait.max(Duration::from_millis(1))) => {}
            }
            continue;
        }
        for action in actions.drain(..) {
            if *shutdown.borrow() {
                return;
            }
            steps::perform(&broker, &mut futures, action).await;
        }
    }
}
