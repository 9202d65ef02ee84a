//! Each planted bug must make the cluster harness fail within a bounded number of seeds: the
//! proof that the harness's checks can fail at all.

use super::cluster::{run, Options};
use crate::config::planted::Planted;
use crate::config::PlantedBug;

/// Seeds tried per planted bug before the harness is declared blind to it.
const MAX_SEEDS: u64 = 2000;

/// The first seed (and the failure) on which the harness catches `bug`.
fn first_catch(voters: usize, bug: PlantedBug) -> (u64, String) {
    let mut opts = Options::new(voters);
    opts.planted = Planted::new(Some(bug));
    for seed in 0..MAX_SEEDS {
        if let Err(why) = run(seed, &opts) {
            return (seed, why);
        }
    }
    panic!("the harness missed {bug:?} in {MAX_SEEDS} seeds");
}

fn report(name: &str, voters: usize, bug: PlantedBug) {
    let (seed, why) = first_catch(voters, bug);
    eprintln!(
        "planted `{name}` ({voters} voters) caught after {} seeds: {why}",
        seed + 1
    );
}

#[test]
fn catches_sending_before_quorum_state_is_persisted() {
    let bug = PlantedBug::QuorumVoteBeforePersist;
    report("send_before_persist", 3, bug);
}

#[test]
fn catches_committing_on_a_minority() {
    let bug = PlantedBug::QuorumCommitOnMinority;
    report("commit_on_minority", 3, bug);
    report("commit_on_minority", 5, bug);
}

#[test]
fn catches_granting_votes_to_shorter_logs() {
    let bug = PlantedBug::QuorumGrantShorterLog;
    report("grant_shorter_log", 3, bug);
    report("grant_shorter_log", 5, bug);
}

#[test]
fn catches_fetches_without_an_epoch_check() {
    let bug = PlantedBug::QuorumNoDivergingEpoch;
    report("no_fetch_epoch_check", 3, bug);
    report("no_fetch_epoch_check", 5, bug);
}

/// The mutation run's quorum bugs (issue 21): how many seeds the core's own harness needs.
#[test]
#[ignore = "a measurement: cargo test --lib raft::tests::planted::mutation -- --ignored --nocapture"]
fn mutation_run_quorum_bugs() {
    for (name, bug) in [
        ("commit_old_epoch", PlantedBug::QuorumCommitOldEpoch),
        ("double_vote", PlantedBug::QuorumDoubleVote),
        (
            "vote_compares_offset_only",
            PlantedBug::QuorumVoteComparesOffsetOnly,
        ),
    ] {
        for voters in [3, 5] {
            let mut opts = Options::new(voters);
            opts.planted = Planted::new(Some(bug));
            let caught = (0..MAX_SEEDS).find_map(|seed| run(seed, &opts).err().map(|w| (seed, w)));
            match caught {
                Some((seed, why)) => eprintln!(
                    "planted `{name}` ({voters} voters) caught after {} seeds: {why}",
                    seed + 1
                ),
                None => eprintln!("planted `{name}` ({voters} voters) missed in {MAX_SEEDS} seeds"),
            }
        }
    }
}
