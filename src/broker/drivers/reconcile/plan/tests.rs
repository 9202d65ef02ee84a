//! Data-driven: each case is one line, `image | local | expected changes` for node 1.
//! Image: `topic@id/index=replicas` (`a@1/0=1,2`: partition 0 of topic a, id 1, on brokers 1
//! and 2). Local: `topic-index@id`. Changes: `-a-0` remove, `+a-0@1` open, `~a-0` role.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::*;
use crate::controller::image::PartitionRecord;

const NODE: i32 = 1;

const CASES: &[&str] = &[
    // Nothing anywhere.
    " | | ",
    // A new topic placed here opens; one placed elsewhere does not.
    "a@1/0=1 b@2/0=2 | | +a-0@1 ~a-0",
    // Already open: only its role.
    "a@1/0=1,2 a@1/1=2,1 | a-0@1 a-1@1 | ~a-0 ~a-1",
    // Moved away, and a deleted topic: removed.
    "a@1/0=2 | a-0@1 c-0@3 | -a-0 -c-0",
    // Re-created under the same name (another id): removed, then opened afresh.
    "a@7/0=1 | a-0@1 | -a-0 +a-0@7 ~a-0",
    // Removals before openings, roles last, each in key order.
    "b@2/0=1 a@1/0=2 a@1/1=1 | z-0@9 a-0@1 | -a-0 -z-0 +a-1@1 +b-0@2 ~a-1 ~b-0",
];

/// The same, while the image is still catching up at start-up (the start-up gate closed): a
/// replica of a live topic moved away is kept, since a later record may place it here again
/// (seed 308 of `reassign-under-faults`: a restarted broker replaying "moved away, then back"
/// deleted the log it was the last in-sync holder of, was elected as the last known leader
/// with an empty log, and every follower truncated to 0). Deleted or re-created topics go.
const CATCHING_UP: &[&str] = &[
    // Moved away in this intermediate image: kept, no role.
    "a@1/0=2 | a-0@1 | ",
    // Moved away and back: the local replica (and its log) is reused.
    "a@1/0=2,1 | a-0@1 | ~a-0",
    // A deleted topic and a name re-created as another topic: removed as when caught up.
    "a@7/0=1 | a-0@1 c-0@3 | -a-0 -c-0 +a-0@7 ~a-0",
];

fn id(n: &str) -> Uuid {
    Uuid::from_u64_pair(0, n.parse().unwrap())
}

/// Per `(topic, id)`, its partitions: `(index, replicas)`.
type Placements = BTreeMap<(String, String), Vec<(i32, Vec<i32>)>>;

fn image(spec: &str) -> MetadataImage {
    let mut topics = Placements::new();
    for item in spec.split_whitespace() {
        let (topic, rest) = item.split_once('@').unwrap();
        let (tid, rest) = rest.split_once('/').unwrap();
        let (index, replicas) = rest.split_once('=').unwrap();
        let replicas = replicas.split(',').map(|r| r.parse().unwrap()).collect();
        topics
            .entry((topic.to_string(), tid.to_string()))
            .or_default()
            .push((index.parse().unwrap(), replicas));
    }
    let mut image = MetadataImage::default();
    let mut offset = 0;
    let mut apply = |image: &mut MetadataImage, record: MetadataRecord| {
        image.apply(offset, &record);
        offset += 1;
    };
    for ((name, tid), partitions) in topics {
        apply(
            &mut image,
            MetadataRecord::topic(&name, id(&tid), BTreeMap::new()),
        );
        for (index, replicas) in partitions {
            apply(
                &mut image,
                MetadataRecord::Partition(PartitionRecord {
                    directories: Vec::new(),
                    topic_id: id(&tid),
                    partition: index,
                    isr: replicas.clone(),
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
                    leader: replicas[0],
                    leader_epoch: 0,
                    partition_epoch: 0,
                    leader_recovering: false,
                    replicas,
                }),
            );
        }
    }
    image
}

fn key(s: &str) -> PartitionKey {
    let (topic, index) = s.rsplit_once('-').unwrap();
    (topic.to_string(), index.parse().unwrap())
}

fn local(spec: &str) -> BTreeMap<PartitionKey, Uuid> {
    spec.split_whitespace()
        .map(|item| {
            let (k, tid) = item.split_once('@').unwrap();
            (key(k), id(tid))
        })
        .collect()
}

fn show(changes: &[Change]) -> String {
    let name = |(t, i): &PartitionKey| format!("{t}-{i}");
    changes
        .iter()
        .map(|c| match c {
            Change::Remove(k) => format!("-{}", name(k)),
            Change::Open(k, id) => format!("+{}@{}", name(k), id.as_u64_pair().1),
            Change::SyncRole(k) => format!("~{}", name(k)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_plan_matches_every_case() {
    for case in CASES {
        let [img, loc, want] = case.split('|').collect::<Vec<_>>()[..] else {
            panic!("a case has three parts: {case}");
        };
        let got = show(&plan(&image(img), NODE, &local(loc), true));
        assert_eq!(got, want.trim(), "case: {case}");
    }
}

#[test]
fn a_plan_carried_out_leaves_nothing_to_do_but_roles() {
    for case in CASES {
        let parts: Vec<&str> = case.split('|').collect();
        let image = image(parts[0]);
        let mut local = local(parts[1]);
        for change in plan(&image, NODE, &local, true) {
            match change {
                Change::Remove(k) => assert!(local.remove(&k).is_some(), "{case}"),
                Change::Open(k, id) => assert!(local.insert(k, id).is_none(), "{case}"),
                Change::SyncRole(k) => assert!(local.contains_key(&k), "{case}"),
            }
        }
        let again = plan(&image, NODE, &local, true);
        assert!(
            again.iter().all(|c| matches!(c, Change::SyncRole(_))),
            "{case}: {again:?}"
        );
    }
}

#[test]
fn effects_of_records_and_of_a_snapshot() {
    let offsets = crate::group::OFFSETS_TOPIC;
    let mut new = image(&format!("{offsets}@5/0=1 {offsets}@5/1=1 a@1/0=1"));
    let broker = |name: &str| MetadataRecord::ResourceConfig {
        resource: ConfigResource::Broker(name.to_string()),
        changes: BTreeMap::new(),
    };
    let records = [
        MetadataRecord::topic(offsets, id("5"), BTreeMap::new()),
        MetadataRecord::TopicConfig {
            name: "a".into(),
            changes: BTreeMap::new(),
        },
        broker("2"),
        broker("1"),
        broker(""),
        MetadataRecord::topic("a", id("1"), BTreeMap::new()),
    ];
    assert_eq!(
        effects(&new, NODE, &Delta::Records(&records)),
        [
            Effect::OffsetsTopic { partitions: 2 },
            Effect::ReconfigureTopic("a".into()),
            Effect::ReconfigureAll,
            Effect::ReconfigureAll,
        ]
    );
    assert_eq!(
        effects(&new, NODE, &Delta::Snapshot),
        [
            Effect::OffsetsTopic { partitions: 2 },
            Effect::ReconfigureAll
        ]
    );
    new = image("a@1/0=1");
    assert_eq!(
        effects(&new, NODE, &Delta::Snapshot),
        [Effect::ReconfigureAll]
    );
}

#[test]
fn a_catching_up_image_keeps_replicas_it_moved_away() {
    for case in CATCHING_UP {
        let [img, loc, want] = case.split('|').collect::<Vec<_>>()[..] else {
            panic!("a case has three parts: {case}");
        };
        let got = show(&plan(&image(img), NODE, &local(loc), false));
        assert_eq!(got, want.trim(), "case: {case}");
    }
}
