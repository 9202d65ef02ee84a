//! Each planted bug must make the cluster harness fail within a bounded number of seeds: the
//! proof that the harness's checks can fail at all.

use super::cluster::{run, Options};
use crate::raft::PlantedBugs;

/// Seeds tried per planted bug before the harness is declared blind to it.
const MAX_SEEDS: u64 = 2000;

/// The first seed (and the failure) on which the harness catches `bugs`.
fn first_catch(voters: usize, bugs: PlantedBugs) -> (u64, String) {
    let mut opts = Options::new(voters);
    opts.bugs = bugs;
    for seed in 0..MAX_SEEDS {
        if let Err(why) = run(seed, &opts) {
            return (seed, why);
        }
    }
    panic!("the harness missed {bugs:?} in {MAX_SEEDS} seeds");
}

fn report(name: &str, voters: usize, bugs: PlantedBugs) {
    let (seed, why) = first_catch(voters, bugs);
    eprintln!(
        "planted `{name}` ({voters} voters) caught after {} seeds: {why}",
        seed + 1
    );
}

#[test]
fn catches_sending_before_quorum_state_is_persisted() {
    let bugs = PlantedBugs {
        send_before_persist: true,
        ..PlantedBugs::default()
    };
    report("send_before_persist", 3, bugs);
}

#[test]
fn catches_committing_on_a_minority() {
    let bugs = PlantedBugs {
        commit_on_minority: true,
        ..PlantedBugs::default()
    };
    report("commit_on_minority", 3, bugs);
    report("commit_on_minority", 5, bugs);
}

#[test]
fn catches_granting_votes_to_shorter_logs() {
    let bugs = PlantedBugs {
        grant_shorter_log: true,
        ..PlantedBugs::default()
    };
    report("grant_shorter_log", 3, bugs);
    report("grant_shorter_log", 5, bugs);
}

#[test]
fn catches_fetches_without_an_epoch_check() {
    let bugs = PlantedBugs {
        no_fetch_epoch_check: true,
        ..PlantedBugs::default()
    };
    report("no_fetch_epoch_check", 3, bugs);
    report("no_fetch_epoch_check", 5, bugs);
}
