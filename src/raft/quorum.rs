//! Quorum math as pure functions (the shape of raft-rs's `quorum/majority.rs`): the offset a
//! majority of voters has replicated, and the outcome of a vote.

use std::collections::{BTreeMap, BTreeSet};

use super::types::{NodeId, Offset};

/// The largest offset that a majority of `voters` has reached, given each voter's match
/// offset (a voter missing from `matches` counts as 0). KRaft: sort descending, take index
/// ⌊n/2⌋.
pub fn committed_offset(voters: &BTreeSet<NodeId>, matches: &BTreeMap<NodeId, Offset>) -> Offset {
    assert!(!voters.is_empty(), "an empty voter set commits nothing");
    let mut offsets: Vec<Offset> = voters
        .iter()
        .map(|v| matches.get(v).copied().unwrap_or(0))
        .collect();
    offsets.sort_unstable_by(|a, b| b.cmp(a));
    offsets[voters.len() / 2]
}

/// The outcome of an election so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteResult {
    Won,
    Lost,
    Pending,
}

/// Tallies `votes` (voter → granted) over `voters`; answers from non-voters do not count.
pub fn tally(voters: &BTreeSet<NodeId>, votes: &BTreeMap<NodeId, bool>) -> VoteResult {
    let majority = voters.len() / 2 + 1;
    let (mut granted, mut rejected) = (0, 0);
    for (voter, yes) in votes {
        if voters.contains(voter) {
            if *yes {
                granted += 1;
            } else {
                rejected += 1;
            }
        }
    }
    if granted >= majority {
        VoteResult::Won
    } else if voters.len() - rejected < majority {
        VoteResult::Lost
    } else {
        VoteResult::Pending
    }
}

/// Whether `ids` include a majority of `voters`.
pub fn is_majority(voters: &BTreeSet<NodeId>, ids: &BTreeSet<NodeId>) -> bool {
    voters.intersection(ids).count() > voters.len() / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(voters, per-voter values, expected)`: one row of a table.
    type Row<'a, V, R> = (&'a [NodeId], &'a [(NodeId, V)], R);

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn committed_offset_table() {
        // (voters, matches, committed)
        let cases: &[Row<Offset, Offset>] = &[
            (&[1], &[(1, 7)], 7),
            (&[1], &[], 0),
            (&[1, 2], &[(1, 7), (2, 3)], 3),
            (&[1, 2, 3], &[(1, 7), (2, 3), (3, 5)], 5),
            (&[1, 2, 3], &[(1, 7)], 0),
            (&[1, 2, 3], &[(1, 7), (2, 7)], 7),
            (&[1, 2, 3, 4], &[(1, 9), (2, 8), (3, 2), (4, 1)], 2),
            (&[1, 2, 3, 4], &[(1, 9), (2, 8), (3, 8), (4, 1)], 8),
            (
                &[1, 2, 3, 4, 5],
                &[(1, 9), (2, 8), (3, 6), (4, 1), (5, 0)],
                6,
            ),
            // Match offsets of non-voters (observers) never count.
            (&[1, 2, 3], &[(1, 9), (7, 9), (8, 9)], 0),
        ];
        for (voters, matches, want) in cases {
            let matches: BTreeMap<_, _> = matches.iter().copied().collect();
            assert_eq!(
                committed_offset(&set(voters), &matches),
                *want,
                "{voters:?} {matches:?}"
            );
        }
    }

    #[test]
    fn tally_table() {
        use VoteResult::*;
        // (voters, votes, result)
        let cases: &[Row<bool, VoteResult>] = &[
            (&[1], &[(1, true)], Won),
            (&[1], &[], Pending),
            (&[1, 2, 3], &[(1, true)], Pending),
            (&[1, 2, 3], &[(1, true), (2, true)], Won),
            (&[1, 2, 3], &[(1, true), (2, false)], Pending),
            (&[1, 2, 3], &[(1, true), (2, false), (3, false)], Lost),
            (&[1, 2, 3, 4], &[(1, true), (2, true)], Pending),
            (&[1, 2, 3, 4], &[(1, true), (2, false), (3, false)], Lost),
            (&[1, 2, 3, 4, 5], &[(1, true), (2, true), (3, true)], Won),
            (
                &[1, 2, 3, 4, 5],
                &[(1, true), (4, false), (5, false)],
                Pending,
            ),
            (
                &[1, 2, 3, 4, 5],
                &[(1, true), (3, false), (4, false), (5, false)],
                Lost,
            ),
            // Votes from non-voters are ignored.
            (&[1, 2, 3], &[(1, true), (9, true), (8, true)], Pending),
        ];
        for (voters, votes, want) in cases {
            let votes: BTreeMap<_, _> = votes.iter().copied().collect();
            assert_eq!(tally(&set(voters), &votes), *want, "{voters:?} {votes:?}");
        }
    }

    #[test]
    fn majority_table() {
        assert!(is_majority(&set(&[1, 2, 3]), &set(&[1, 3])));
        assert!(!is_majority(&set(&[1, 2, 3]), &set(&[3])));
        assert!(!is_majority(&set(&[1, 2, 3, 4]), &set(&[1, 2])));
        assert!(!is_majority(&set(&[1, 2, 3]), &set(&[3, 7, 8])));
    }
}
