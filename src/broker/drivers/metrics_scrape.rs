//! A scrape of the metrics endpoint: the gauges Kafka computes from its state (partition and
//! leader counts, under-replicated and offline partitions, the controller's view of brokers,
//! groups and lag) are computed here from the committed image and the local partitions when
//! asked for, so nothing on the request path keeps them up to date.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::broker::shared::Broker;
use crate::metrics::{self, LagGauge, PartitionGauge, Snapshot};

impl Broker {
    /// The Prometheus text of this node's metrics (what `GET /metrics` answers).
    pub fn metrics_text(&self) -> String {
        metrics::render(&self.metrics, &self.metrics_snapshot())
    }

    /// The counters the request path and the drivers update.
    pub fn metrics(&self) -> &metrics::Metrics {
        &self.metrics
    }

    fn metrics_snapshot(&self) -> Snapshot {
        let node = self.config.node_id;
        let image = self.image();
        let status = self.quorum_status();
        let offline = self.is_storage_offline();
        let mut s = Snapshot {
            active_controller: self.is_active_controller() && self.config.is_controller(),
            last_applied_offset: image.applied(),
            last_committed_offset: status.high_watermark as i64,
            raft_state: status.role.as_str(),
            raft_leader: status.leader.map_or(-1, i64::from),
            raft_epoch: i64::from(status.epoch),
            raft_high_watermark: status.high_watermark as i64,
            offline_log_dirs: offline as i64,
            global_topics: image.topics().count() as i64,
            version: env!("CARGO_PKG_VERSION"),
            ..Snapshot::default()
        };
        for b in image.brokers() {
            if b.fenced {
                s.fenced_brokers += 1;
            } else {
                s.active_brokers += 1;
            }
        }
        let open: Vec<(String, i32)> = self.partitions.read().unwrap().keys().cloned().collect();
        let mut min_isr: BTreeMap<String, usize> = BTreeMap::new();
        for ((topic_id, index), p) in image.partitions() {
            s.global_partitions += 1;
            if !p.has_leader() {
                s.offline_partitions += 1;
            } else if p.replicas.first() != Some(&p.leader) {
                s.preferred_replica_imbalance += 1;
            }
            let here = p.replicas.contains(&node);
            if !here && p.leader != node {
                continue;
            }
            let Some(topic) = image.topic_by_id(topic_id).map(|t| t.name.clone()) else {
                continue;
            };
            if here {
                s.partitions += 1;
                if offline {
                    s.offline_replicas += 1;
                }
                if open.binary_search(&(topic.clone(), index)).is_err() {
                    s.remaining_logs_to_recover += 1;
                }
            }
            if p.leader != node {
                continue;
            }
            s.leaders += 1;
            let min = *min_isr.entry(topic.clone()).or_insert_with(|| {
                self.topic_config(&topic)
                    .map_or(1, |c| c.min_insync_replicas.max(1) as usize)
            });
            let isr = p.isr.len();
            s.under_replicated += (isr < p.replicas.len()) as i64;
            s.under_min_isr += (isr < min) as i64;
            s.at_min_isr += (isr == min) as i64;
            s.partition_gauges.push(PartitionGauge {
                topic,
                partition: index,
                isr,
                elr: p.elr.len(),
                recovering: p.leader_recovering,
            });
        }
        self.group_gauges(&mut s);
        s
    }

    /// Groups this node coordinates: counts by state, committed offsets and their lag against
    /// the high watermark of the local replica (a follower's is at most a fetch behind).
    fn group_gauges(&self, s: &mut Snapshot) {
        let committed = self.groups.read(|c| {
            let (_, listings) = c.list_groups();
            let mut committed = Vec::new();
            for g in listings {
                s.groups_total += 1;
                s.groups.push((g.state.name(), 1));
                if let Ok(offsets) = c.fetch_offsets(&g.group_id, None) {
                    committed.push((g.group_id, offsets));
                }
            }
            committed
        });
        for (group, offsets) in committed {
            for o in offsets.into_iter().filter(|o| o.offset >= 0) {
                let hw: Option<i64> = self
                    .partition(&o.topic, o.partition)
                    .map(|h: Arc<_>| h.lock().high_watermark());
                s.lag.push(LagGauge {
                    group: group.clone(),
                    topic: o.topic,
                    partition: o.partition,
                    committed: o.offset,
                    lag: hw.map(|hw| (hw - o.offset).max(0)),
                });
            }
        }
    }
}
