//! A simulated operator moving the workload topic's partitions between brokers under the
//! faults: every `interval` it picks a partition and a random target of `replication_factor`
//! distinct brokers (in random order, so the preferred leader moves too), sends
//! AlterPartitionReassignments through `weir::client` to any node, and sometimes cancels the
//! reassignment in progress instead. Outcomes are notes in the history; what is judged is the
//! workload's: no acknowledged write lost, replicas agreeing below their high watermarks.

use std::net::SocketAddr;
use std::time::Duration;

use madsim::rand::seq::SliceRandom;
use madsim::rand::Rng;
use weir::io::Io;

use crate::history::{Event, History};
use crate::workload::{connect, RunClock};

#[derive(Clone, Debug)]
pub struct ReassignSpec {
    pub addrs: Vec<SocketAddr>,
    pub topic: String,
    pub partitions: i32,
    /// Node ids that may take replicas.
    pub brokers: Vec<i32>,
    pub replication_factor: usize,
    pub interval: Duration,
    pub timeout: Duration,
    /// One operation in this many is a cancel.
    pub cancel_one_in: u32,
    pub until_ms: u64,
}

pub async fn run_reassigner(io: Io, spec: ReassignSpec, history: History, clock: RunClock) {
    let mut op = 0usize;
    while clock.now_ms() < spec.until_ms {
        io.clock.sleep(spec.interval).await;
        // Drawn in a block: the generator is not held across an await.
        let (partition, target) = {
            let mut rng = madsim::rand::thread_rng();
            let partition = rng.gen_range(0..spec.partitions.max(1));
            let cancel = spec.cancel_one_in > 0 && rng.gen_range(0..spec.cancel_one_in) == 0;
            let target = (!cancel).then(|| {
                let mut brokers = spec.brokers.clone();
                brokers.shuffle(&mut rng);
                brokers.truncate(spec.replication_factor);
                brokers
            });
            (partition, target)
        };
        op += 1;
        let addr = spec.addrs[op % spec.addrs.len()];
        let outcome = async {
            let mut c = connect(&io, addr, spec.timeout).await?;
            let plan = vec![(spec.topic.clone(), partition, target.clone())];
            c.alter_partition_reassignments(&plan, true).await
        }
        .await;
        let what = match &target {
            Some(t) => format!("reassign {}-{partition} to {t:?}", spec.topic),
            None => format!("cancel the reassignment of {}-{partition}", spec.topic),
        };
        let note = match outcome {
            Ok(outcomes) => match outcomes.first().and_then(|o| o.error.clone()) {
                None => format!("{what}: accepted"),
                Some((e, m)) => format!("{what}: {e:?} {m}"),
            },
            Err(e) => format!("{what}: {e}"),
        };
        history.record(clock.now_ms(), Event::Note(note));
    }
}
