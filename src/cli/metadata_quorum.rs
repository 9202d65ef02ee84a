//! `weir metadata-quorum describe --status | --replication`: the metadata quorum as
//! `kafka-metadata-quorum.sh` prints it, from DescribeQuorum (any broker forwards it to the
//! quorum leader) and the cluster id from Metadata.

use clap::{Args, Subcommand};

use weir::client::{QuorumDescription, QuorumReplica};
use weir::io::Io;

use super::output::{print_json, Output};

#[derive(Args)]
pub struct MetadataQuorumArgs {
    #[command(flatten)]
    server: super::ServerArgs,
    #[command(subcommand)]
    action: QuorumAction,
}

#[derive(Subcommand)]
enum QuorumAction {
    /// Describe the quorum: its status (leader, epoch, high watermark, voters, observers) or
    /// each replica's replication progress.
    Describe {
        /// The leader, epoch, high watermark, the largest follower lag, voters and observers.
        #[arg(
            long,
            conflicts_with = "replication",
            required_unless_present = "replication"
        )]
        status: bool,
        /// One line per voter and observer: log end offset, lag, last fetch and catch-up times.
        #[arg(long)]
        replication: bool,
        /// Times as "N ms ago" instead of epoch milliseconds.
        #[arg(long = "human-readable")]
        human_readable: bool,
    },
}

pub async fn run(io: &Io, args: MetadataQuorumArgs, output: Output) -> anyhow::Result<()> {
    let mut client = args.server.connect_any(io).await?;
    let QuorumAction::Describe {
        status,
        replication,
        human_readable,
    } = args.action;
    let quorum = client.describe_quorum().await?;
    let now = io.clock.wall_ms();
    if status {
        let cluster_id = client.cluster_id().await?.unwrap_or_default();
        let s = Status::of(&cluster_id, &quorum);
        if output.json() {
            return print_json(&s);
        }
        print!("{}", s.render());
    } else if replication {
        let rows = replication_rows(&quorum);
        if output.json() {
            return print_json(&rows);
        }
        print!(
            "{}",
            render_replication(&rows, human_readable.then_some(now))
        );
    }
    Ok(())
}

/// `--status`, as Kafka computes it.
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
struct Status {
    cluster_id: String,
    leader_id: i32,
    leader_epoch: i32,
    high_watermark: i64,
    /// The leader's log end minus the furthest-behind voter's.
    max_follower_lag: i64,
    /// How long ago, relative to the leader's last catch-up, that voter last caught up; 0 when
    /// it is the leader, -1 when a time is unknown.
    max_follower_lag_time_ms: i64,
    current_voters: Vec<i32>,
    current_observers: Vec<i32>,
}

impl Status {
    fn of(cluster_id: &str, q: &QuorumDescription) -> Status {
        let leader = q.voters.iter().find(|v| v.node_id == q.leader_id);
        let leader_end = leader.map_or(q.high_watermark, |l| l.log_end_offset);
        let furthest = q
            .voters
            .iter()
            .max_by_key(|v| (leader_end - v.log_end_offset, -v.node_id));
        let (lag, lag_time) = match (leader, furthest) {
            (Some(l), Some(f)) if f.node_id != l.node_id => {
                let time = if l.last_caught_up_timestamp >= 0 && f.last_caught_up_timestamp >= 0 {
                    l.last_caught_up_timestamp - f.last_caught_up_timestamp
                } else {
                    -1
                };
                (leader_end - f.log_end_offset, time)
            }
            _ => (0, 0),
        };
        Status {
            cluster_id: cluster_id.to_string(),
            leader_id: q.leader_id,
            leader_epoch: q.leader_epoch,
            high_watermark: q.high_watermark,
            max_follower_lag: lag,
            max_follower_lag_time_ms: lag_time,
            current_voters: q.voters.iter().map(|v| v.node_id).collect(),
            current_observers: q.observers.iter().map(|o| o.node_id).collect(),
        }
    }

    fn render(&self) -> String {
        let list = |ids: &[i32]| {
            let ids: Vec<String> = ids.iter().map(i32::to_string).collect();
            format!("[{}]", ids.join(","))
        };
        format!(
            "ClusterId:              {}\n\
             LeaderId:               {}\n\
             LeaderEpoch:            {}\n\
             HighWatermark:          {}\n\
             MaxFollowerLag:         {}\n\
             MaxFollowerLagTimeMs:   {}\n\
             CurrentVoters:          {}\n\
             CurrentObservers:       {}\n",
            self.cluster_id,
            self.leader_id,
            self.leader_epoch,
            self.high_watermark,
            self.max_follower_lag,
            self.max_follower_lag_time_ms,
            list(&self.current_voters),
            list(&self.current_observers),
        )
    }
}

/// One line of `--replication`.
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
struct ReplicationRow {
    node_id: i32,
    log_end_offset: i64,
    /// Behind the leader's log end; -1 when this replica's end is unknown.
    lag: i64,
    last_fetch_timestamp: i64,
    last_caught_up_timestamp: i64,
    /// Leader, Follower or Observer.
    status: &'static str,
}

fn replication_rows(q: &QuorumDescription) -> Vec<ReplicationRow> {
    let leader_end = q
        .voters
        .iter()
        .find(|v| v.node_id == q.leader_id)
        .map_or(q.high_watermark, |l| l.log_end_offset);
    let row = |r: &QuorumReplica, status| ReplicationRow {
        node_id: r.node_id,
        log_end_offset: r.log_end_offset,
        lag: if r.log_end_offset >= 0 {
            (leader_end - r.log_end_offset).max(0)
        } else {
            -1
        },
        last_fetch_timestamp: r.last_fetch_timestamp,
        last_caught_up_timestamp: r.last_caught_up_timestamp,
        status,
    };
    // The leader first, then the other voters, then the observers (as Kafka lists them).
    let mut rows: Vec<ReplicationRow> = q
        .voters
        .iter()
        .filter(|v| v.node_id == q.leader_id)
        .map(|v| row(v, "Leader"))
        .collect();
    rows.extend(
        q.voters
            .iter()
            .filter(|v| v.node_id != q.leader_id)
            .map(|v| row(v, "Follower")),
    );
    rows.extend(q.observers.iter().map(|o| row(o, "Observer")));
    rows
}

/// `now`: print times as "N ms ago" (`--human-readable`).
fn render_replication(rows: &[ReplicationRow], now: Option<i64>) -> String {
    let time = |t: i64| match now {
        _ if t < 0 => "-1".to_string(),
        Some(now) => format!("{} ms ago", (now - t).max(0)),
        None => t.to_string(),
    };
    let mut out = "NodeId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus\n"
        .to_string();
    for r in rows {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\n",
            r.node_id,
            r.log_end_offset,
            r.lag,
            time(r.last_fetch_timestamp),
            time(r.last_caught_up_timestamp),
            r.status
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(node_id: i32, end: i64, caught_up: i64) -> QuorumReplica {
        QuorumReplica {
            node_id,
            log_end_offset: end,
            last_fetch_timestamp: caught_up,
            last_caught_up_timestamp: caught_up,
        }
    }

    fn quorum() -> QuorumDescription {
        QuorumDescription {
            leader_id: 2,
            leader_epoch: 7,
            high_watermark: 100,
            voters: vec![
                replica(1, 90, 1_000),
                replica(2, 105, 1_500),
                replica(3, 105, 1_500),
            ],
            observers: vec![replica(4, -1, -1)],
        }
    }

    #[test]
    fn status_measures_the_furthest_voter_from_the_leaders_log_end() {
        let s = Status::of("abc", &quorum());
        assert_eq!((s.max_follower_lag, s.max_follower_lag_time_ms), (15, 500));
        assert_eq!(s.current_voters, vec![1, 2, 3]);
        assert_eq!(s.current_observers, vec![4]);
        assert!(s
            .render()
            .starts_with("ClusterId:              abc\nLeaderId:               2\n"));
        assert!(s.render().contains("CurrentVoters:          [1,2,3]\n"));
    }

    #[test]
    fn a_caught_up_quorum_has_no_lag() {
        let mut q = quorum();
        q.voters[0] = replica(1, 105, 1_500);
        let s = Status::of("abc", &q);
        assert_eq!((s.max_follower_lag, s.max_follower_lag_time_ms), (0, 0));
    }

    #[test]
    fn replication_lists_the_leader_then_followers_then_observers() {
        let rows = replication_rows(&quorum());
        let order: Vec<(i32, &str, i64)> =
            rows.iter().map(|r| (r.node_id, r.status, r.lag)).collect();
        assert_eq!(
            order,
            vec![
                (2, "Leader", 0),
                (1, "Follower", 15),
                (3, "Follower", 0),
                (4, "Observer", -1)
            ]
        );
        let text = render_replication(&rows, Some(2_000));
        assert!(
            text.contains("1\t90\t15\t1000 ms ago\t1000 ms ago\tFollower\n"),
            "{text}"
        );
        assert!(text.contains("4\t-1\t-1\t-1\t-1\tObserver\n"), "{text}");
    }
}
