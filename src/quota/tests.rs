use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn quotas(set: &[(QuotaEntity, &str, f64)]) -> ClientQuotas {
    let mut q = ClientQuotas::default();
    for (e, k, v) in set {
        q.set(e, k, Some(*v));
    }
    q
}

fn n(s: &str) -> EntityName {
    EntityName::Named(s.into())
}

#[test]
fn the_most_specific_quota_wins_in_kafkas_order() {
    use EntityName::Default as D;
    let all = [
        (QuotaEntity::user_client(n("alice"), n("app")), 1.0),
        (QuotaEntity::user_client(n("alice"), D), 2.0),
        (QuotaEntity::user(n("alice")), 3.0),
        (QuotaEntity::user_client(D, n("app")), 4.0),
        (QuotaEntity::user_client(D, D), 5.0),
        (QuotaEntity::user(D), 6.0),
        (QuotaEntity::client(n("app")), 7.0),
        (QuotaEntity::client(D), 8.0),
    ];
    let key = "producer_byte_rate";
    // Taking away the most specific one at a time, the next one applies, with its tags.
    let tags = [
        ("alice", "app"),
        ("alice", "app"),
        ("alice", ""),
        ("alice", "app"),
        ("alice", "app"),
        ("alice", ""),
        ("", "app"),
        ("", "app"),
    ];
    for skip in 0..all.len() {
        let set: Vec<_> = all[skip..]
            .iter()
            .map(|(e, v)| (e.clone(), key, *v))
            .collect();
        let q = quotas(&set);
        let (limit, u, c) = resolve(&q, QuotaKind::Produce, "alice", "app").unwrap();
        assert_eq!(limit, all[skip].1, "skipping {skip}");
        assert_eq!((u.as_str(), c.as_str()), tags[skip], "skipping {skip}");
        // Another kind has no quota.
        assert!(resolve(&q, QuotaKind::Fetch, "alice", "app").is_none());
    }
    // Another user or client id does not match named entities.
    let q = quotas(&[(QuotaEntity::user(n("alice")), key, 1.0)]);
    assert!(resolve(&q, QuotaKind::Produce, "bob", "app").is_none());
    let q = quotas(&[(QuotaEntity::client(n("app")), key, 1.0)]);
    assert!(resolve(&q, QuotaKind::Produce, "bob", "other").is_none());
}

#[test]
fn throttle_time_is_what_brings_the_rate_back_to_the_limit() {
    // 2 windows of 1 s: the span is at least 1 s.
    let windows = QuotaWindows {
        samples: 2,
        window: ms(1000),
    };
    let q = quotas(&[(
        QuotaEntity::user(EntityName::Default),
        "producer_byte_rate",
        1000.0,
    )]);
    let who = ("ANONYMOUS", "c");
    // (at ms, bytes, expected throttle ms)
    let steps: &[(u64, f64, u64)] = &[
        (0, 500.0, 0),   // 500 over a 1 s span
        (100, 500.0, 0), // 1000: exactly the limit
        // 2000 bytes over the span of 0.2 s + 1 window: 1666/s, (1666-1000)/1000 × 1.2 s
        (200, 1000.0, 800),
        // A new window: the span is the 1.2 s covered, so still 1666/s.
        (1200, 0.0, 800),
    ];
    let mut core = ClientQuotaCore::new(windows);
    for &(at, bytes, expected) in steps {
        let t = core.record(ms(at), &q, QuotaKind::Produce, who, bytes);
        assert_eq!(t.as_millis() as u64, expected, "at {at}");
    }
    // After both windows expire nothing is counted, and the rate is forgotten.
    assert_eq!(
        core.record(ms(5000), &q, QuotaKind::Produce, who, 10.0),
        Duration::ZERO
    );
    assert_eq!(core.tracked(), 1);
    core.record(ms(9000), &q, QuotaKind::Fetch, who, 10.0);
    assert_eq!(
        core.tracked(),
        0,
        "idle produce rate forgotten; fetch has no quota"
    );
}

#[test]
fn users_under_a_default_quota_have_rates_of_their_own_and_unrecord_takes_back() {
    let q = quotas(&[(
        QuotaEntity::user(EntityName::Default),
        "consumer_byte_rate",
        100.0,
    )]);
    let mut core = ClientQuotaCore::new(QuotaWindows {
        samples: 11,
        window: ms(1000),
    });
    // 10 windows' worth for alice is still within (the span is at least 10 s).
    let t = core.record(ms(0), &q, QuotaKind::Fetch, ("alice", "x"), 1000.0);
    assert_eq!(t, Duration::ZERO);
    let t = core.record(ms(10), &q, QuotaKind::Fetch, ("alice", "y"), 1000.0);
    assert!(t > Duration::ZERO, "alice's clients share her rate");
    let t = core.record(ms(10), &q, QuotaKind::Fetch, ("bob", "x"), 1000.0);
    assert_eq!(t, Duration::ZERO, "bob has his own");
    core.unrecord(ms(10), &q, QuotaKind::Fetch, ("alice", "y"), 1000.0);
    let rate = core
        .rate_of(ms(10), &q, QuotaKind::Fetch, ("alice", "z"))
        .unwrap();
    // 1000 bytes over 10.01 s.
    assert!((rate - 1000.0 / 10.01).abs() < 1e-9, "{rate}");
    // No quota: never throttled, nothing tracked.
    let none = ClientQuotas::default();
    let mut core = ClientQuotaCore::new(QuotaWindows::default());
    assert_eq!(
        core.record(ms(0), &none, QuotaKind::Produce, ("a", "b"), 1e12),
        Duration::ZERO
    );
    assert_eq!(core.tracked(), 0);
}

#[test]
fn a_steady_producer_is_held_to_its_quota() {
    // A client that sends whenever it is not throttled, 10 KB at a time, against 100 KB/s:
    // over 20 s it sends what the quota allows plus at most the first span's burst.
    let windows = QuotaWindows {
        samples: 11,
        window: ms(1000),
    };
    let q = quotas(&[(
        QuotaEntity::client(EntityName::Default),
        "producer_byte_rate",
        100_000.0,
    )]);
    let mut core = ClientQuotaCore::new(windows);
    let mut now = ms(0);
    let mut sent = 0.0;
    while now < ms(20_000) {
        sent += 10_000.0;
        let t = core.record(now, &q, QuotaKind::Produce, ("ANONYMOUS", "p"), 10_000.0);
        now += t.max(ms(1));
    }
    let rate = sent / now.as_secs_f64();
    assert!(rate > 100_000.0 && rate < 160_000.0, "{rate}");
}

#[test]
fn request_time_throttle_is_bounded_by_one_window() {
    // request_percentage 10: 0.1 s of handler time per second. Recorded in percent-seconds,
    // as Kafka records nanos × 100 / 1e9.
    let windows = QuotaWindows {
        samples: 2,
        window: ms(1000),
    };
    let q = quotas(&[(
        QuotaEntity::user(EntityName::Default),
        "request_percentage",
        10.0,
    )]);
    let who = ("alice", "c");
    // (at ms, handler time ms, expected throttle ms)
    let steps: &[(u64, u64, u64)] = &[
        (0, 50, 0),        // 5 %·s over a 1 s span: 5 %
        (10, 50, 0),       // 10 %: the limit
        (20, 60, 580),     // 16 %·s over 1.02 s: (15.69 − 10) / 10 × 1.02 s
        (30, 5_000, 1000), // far over: bounded at one window
    ];
    let mut core = ClientQuotaCore::new(windows);
    for &(at, spent, expected) in steps {
        let percent = spent as f64 / 1000.0 * 100.0;
        let t = core.record(ms(at), &q, QuotaKind::Request, who, percent);
        let got = t.as_millis() as u64;
        assert!(
            got.abs_diff(expected) <= 20,
            "at {at}: {got} ms, expected ~{expected}"
        );
    }
    // The byte rates are not bounded: the same overrun on producer bytes throttles longer.
    let q = quotas(&[(
        QuotaEntity::user(EntityName::Default),
        "producer_byte_rate",
        10.0,
    )]);
    let mut core = ClientQuotaCore::new(windows);
    let t = core.record(ms(0), &q, QuotaKind::Produce, who, 500.0);
    assert_eq!(t, ms(49_000));
}

#[test]
fn controller_mutations_are_refused_strictly_or_throttled_permissively() {
    // 2 partitions/s, 2 windows of 1 s: a burst of 4 partitions.
    let windows = QuotaWindows {
        samples: 2,
        window: ms(1000),
    };
    let q = quotas(&[(
        QuotaEntity::user(n("alice")),
        "controller_mutation_rate",
        2.0,
    )]);
    let alice = ("alice", "admin");
    // (at ms, partitions, strict, expected)
    use Mutation::{Admitted, Refused};
    let steps: &[(u64, f64, bool, Mutation)] = &[
        (0, 3.0, true, Admitted(ms(0))),       // 4 → 1
        (0, 5.0, true, Admitted(ms(0))),       // 1 ≥ 0: admitted; the bucket goes to −4
        (0, 1.0, true, Refused(ms(2000))),     // −4 / 2 per s
        (500, 1.0, true, Refused(ms(1500))),   // refilled 1: −3
        (500, 1.0, false, Admitted(ms(2000))), // permissive: taken anyway, −4
        (2000, 1.0, true, Refused(ms(500))),   // refilled 3: −1
        (2500, 1.0, true, Admitted(ms(0))),    // back at 0: admitted, −1
    ];
    let mut core = ClientQuotaCore::new(windows);
    for (i, &(at, partitions, strict, expected)) in steps.iter().enumerate() {
        let got = core.mutate(ms(at), &q, alice, partitions, strict);
        assert_eq!(got, expected, "step {i}");
    }
    // No quota for bob: never refused, nothing tracked for him.
    let before = core.tracked();
    let got = core.mutate(ms(2000), &q, ("bob", "admin"), 1000.0, true);
    assert_eq!(got, Admitted(ms(0)));
    assert_eq!(core.tracked(), before);
    // A full bucket is forgotten.
    core.mutate(ms(60_000), &q, ("bob", "x"), 1.0, true);
    assert_eq!(core.tracked(), 0);
}
