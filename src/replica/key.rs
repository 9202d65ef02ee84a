//! A partition's key, `(topic, index)`, searchable without building the owned `String`: the
//! broker's partitions map and the replica fetcher's map are keyed by `(String, i32)` and
//! looked up with a borrowed `(&str, i32)` on every fetch.

/// A partition's key, `(topic, index)`, as the partitions map orders it, so the map can be
/// searched with a borrowed `(&str, i32)` (the map's keys are `(String, i32)`).
pub trait PartitionKey {
    fn topic(&self) -> &str;
    fn index(&self) -> i32;
}

impl PartitionKey for (String, i32) {
    fn topic(&self) -> &str {
        &self.0
    }
    fn index(&self) -> i32 {
        self.1
    }
}

impl PartitionKey for (&str, i32) {
    fn topic(&self) -> &str {
        self.0
    }
    fn index(&self) -> i32 {
        self.1
    }
}

impl<'a> std::borrow::Borrow<dyn PartitionKey + 'a> for (String, i32) {
    fn borrow(&self) -> &(dyn PartitionKey + 'a) {
        self
    }
}

// The tuple's order (topic, then index), which `Borrow` requires to be the same.
impl PartialEq for dyn PartitionKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.index() == other.index() && self.topic() == other.topic()
    }
}

impl Eq for dyn PartitionKey + '_ {}

impl PartialOrd for dyn PartitionKey + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn PartitionKey + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.topic(), self.index()).cmp(&(other.topic(), other.index()))
    }
}

// As the owned tuple's `Debug` (for assertion messages).
impl std::fmt::Debug for dyn PartitionKey + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("")
            .field(&self.topic())
            .field(&self.index())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::PartitionKey;
    use std::collections::BTreeMap;

    #[test]
    fn a_borrowed_partition_key_orders_and_finds_as_the_owned_tuple() {
        let topics = [
            "",
            "a",
            "a-1",
            "a.b",
            "ab",
            "b",
            "topic",
            "topic-0",
            "\u{e9}t\u{e9}",
        ];
        let indexes = [i32::MIN, -1, 0, 1, 2, 10, i32::MAX];
        let keys: Vec<(String, i32)> = topics
            .iter()
            .flat_map(|t| indexes.iter().map(move |&i| (t.to_string(), i)))
            .collect();
        for a in &keys {
            for b in &keys {
                let (x, y): (&dyn PartitionKey, &dyn PartitionKey) =
                    (&(a.0.as_str(), a.1), &(b.0.as_str(), b.1));
                assert_eq!(x.cmp(y), a.cmp(b), "{a:?} against {b:?}");
                assert_eq!(x == y, a == b);
            }
            let x: &dyn PartitionKey = &(a.0.as_str(), a.1);
            assert_eq!(format!("{x:?}"), format!("{a:?}"));
        }
        // Every other key in the map: half are found, the rest are not.
        let map: BTreeMap<(String, i32), usize> = keys
            .iter()
            .enumerate()
            .filter(|(n, _)| n % 2 == 0)
            .map(|(n, k)| (k.clone(), n))
            .collect();
        for (n, k) in keys.iter().enumerate() {
            let key: &dyn PartitionKey = &(k.0.as_str(), k.1);
            assert_eq!(map.get(key).copied(), (n % 2 == 0).then_some(n), "{k:?}");
        }
    }
}
