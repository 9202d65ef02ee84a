//! Swarm testing (Groce et al., as FoundationDB's and TigerBeetle's simulators do it): per seed,
//! turn on only a random subset of the scenario's fault kinds, at random rates. A bug that needs
//! a quiet network and many kills hides when every fault is always on; across many seeds some
//! configuration leaves exactly the faults it needs.
//!
//! The draw comes from the seed alone (its own SplitMix64, not madsim's generator), so a seed's
//! configuration is the same on every replay, and `cargo sim run X --seed N --swarm` replays
//! what a swarm sweep ran.

use crate::scenario::Scenario;

/// SplitMix64: a tiny, well-mixed generator, enough to pick subsets and factors.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// One of a few factors, spread around 1 (rates between a quarter and twice the scenario's).
    fn factor(&mut self) -> f64 {
        [0.25, 0.5, 1.0, 1.0, 2.0][self.below(5) as usize]
    }
}

/// What swarm chose for one seed, for the summary and the docs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Choice {
    /// Fault kinds (and narrow-window points) kept, by name.
    pub kept: Vec<String>,
    /// Fault kinds and points dropped.
    pub dropped: Vec<String>,
    /// Factor applied to the time between random faults (above 1: fewer faults).
    pub interval_factor: f64,
}

/// Narrows `scenario` to this seed's swarm configuration. Kinds with weight 0 stay off; of the
/// others each is kept with probability one half (at least one always is), with its weight
/// scaled; the time between faults, their durations and the disk and network rates are scaled
/// too. Narrow-window points are thinned the same way.
pub fn apply(scenario: &mut Scenario, seed: u64) -> Choice {
    let mut mix = Mix(seed ^ 0x5357_4152_4d00_0000);
    let mut choice = Choice {
        interval_factor: 1.0,
        ..Choice::default()
    };
    let nemesis = &mut scenario.nemesis;
    let active: Vec<_> = nemesis
        .weights
        .iter()
        .filter(|(_, &w)| w > 0)
        .map(|(&k, _)| k)
        .collect();
    let points: Vec<_> = nemesis
        .buggify
        .points
        .iter()
        .filter(|(_, &p)| p > 0.0)
        .map(|(&k, _)| k)
        .collect();
    let sources = active.len() + points.len();
    if sources == 0 {
        return choice;
    }
    // Keep each source with probability one half; if none survives, keep one at random.
    let mut keep: Vec<bool> = (0..sources).map(|_| mix.coin()).collect();
    if !keep.iter().any(|&k| k) {
        keep[mix.below(sources as u64) as usize] = true;
    }
    for (i, kind) in active.iter().enumerate() {
        if keep[i] {
            let w = nemesis.weights.get_mut(kind).expect("an active kind");
            *w = (*w * (1 + mix.below(4) as u32)).max(1);
            choice.kept.push(format!("{kind:?}"));
        } else {
            nemesis.weights.insert(*kind, 0);
            choice.dropped.push(format!("{kind:?}"));
        }
    }
    for (j, point) in points.iter().enumerate() {
        let p = nemesis
            .buggify
            .points
            .get_mut(point)
            .expect("an active point");
        if keep[active.len() + j] {
            *p = (*p * mix.factor()).min(1.0);
            choice.kept.push(format!("{point:?}"));
        } else {
            *p = 0.0;
            choice.dropped.push(format!("{point:?}"));
        }
    }
    let f = mix.factor();
    choice.interval_factor = f;
    let scale = |v: u64, f: f64| ((v as f64 * f).round() as u64).max(1);
    let [lo, hi] = nemesis.interval_ms;
    nemesis.interval_ms = [scale(lo, f), scale(hi, f).max(scale(lo, f))];
    let d = mix.factor();
    let [lo, hi] = nemesis.duration_ms;
    nemesis.duration_ms = [scale(lo, d), scale(hi, d).max(scale(lo, d))];
    nemesis.disk_error_rate = (nemesis.disk_error_rate * mix.factor()).min(1.0);
    nemesis.loss_rate = (nemesis.loss_rate * mix.factor()).min(0.9);
    choice
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::FaultKind;

    fn scenario() -> Scenario {
        let mut s: Scenario = toml::from_str(
            r#"
            [nemesis]
            weights = { kill = 1, power_loss = 2, isolate = 1, pause = 1, loss = 0 }
            "#,
        )
        .unwrap();
        s.name = "x".into();
        s
    }

    #[test]
    fn the_same_seed_gives_the_same_configuration() {
        let (mut a, mut b) = (scenario(), scenario());
        assert_eq!(apply(&mut a, 17), apply(&mut b, 17));
        assert_eq!(a.nemesis.weights, b.nemesis.weights);
        assert_eq!(a.nemesis.interval_ms, b.nemesis.interval_ms);
    }

    #[test]
    fn seeds_differ_and_a_kind_always_survives() {
        let mut subsets = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let mut s = scenario();
            let choice = apply(&mut s, seed);
            let on: Vec<_> = s
                .nemesis
                .weights
                .iter()
                .filter(|(_, &w)| w > 0)
                .map(|(k, _)| *k)
                .collect();
            assert!(!on.is_empty(), "seed {seed} turned every fault off");
            // A kind the scenario turned off stays off.
            assert_eq!(s.nemesis.weights[&FaultKind::Loss], 0);
            assert_eq!(choice.kept.len() + choice.dropped.len(), 4);
            let [lo, hi] = s.nemesis.interval_ms;
            assert!(0 < lo && lo <= hi);
            subsets.insert(on);
        }
        // Four kinds: fifteen non-empty subsets; 64 seeds see most of them.
        assert!(subsets.len() >= 10, "only {} subsets", subsets.len());
    }

    #[test]
    fn a_scenario_without_faults_is_left_alone() {
        let mut s: Scenario = toml::from_str("").unwrap();
        let before = s.nemesis.interval_ms;
        assert!(apply(&mut s, 3).kept.is_empty());
        assert_eq!(s.nemesis.interval_ms, before);
    }
}
