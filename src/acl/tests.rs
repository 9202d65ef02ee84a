//! Table-driven tests of the authorizer's rules and of filters.

use uuid::Uuid;

use super::*;

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    host: &str,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: name.into(),
        pattern_type,
        principal: principal.into(),
        host: host.into(),
        operation,
        permission,
    }
}

use Operation::*;
use PatternType::{Literal, Prefixed};
use Permission::{Allow, Deny};
use ResourceType::{Cluster, Group, Topic};

fn table(acls: &[AclBinding]) -> AclTable {
    let mut t = AclTable::default();
    for (i, a) in acls.iter().enumerate() {
        t.insert(Uuid::from_u64_pair(0, i as u64 + 1), a.clone());
    }
    t
}

const ALICE: Caller<'static> = Caller {
    principal: "User:alice",
    host: "10.0.0.1",
};

#[test]
fn the_rules_as_a_table() {
    struct Case {
        what: &'static str,
        acls: Vec<AclBinding>,
        allow_if_no_acl: bool,
        op: Operation,
        resource: (ResourceType, &'static str),
        expect: Decision,
    }
    let t = |name: &'static str| (Topic, name);
    let a = |name, pt, principal, host, op, perm| acl(Topic, name, pt, principal, host, op, perm);
    let cases = vec![
        Case {
            what: "no ACL at all, allow.everyone on",
            acls: vec![],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "no ACL at all, allow.everyone off (Kafka's default)",
            acls: vec![],
            allow_if_no_acl: false,
            op: Write,
            resource: t("orders"),
            expect: Decision::Deny,
        },
        Case {
            what: "an ACL for someone else on the resource: no default allow",
            acls: vec![a("orders", Literal, "User:bob", "*", Write, Allow)],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Deny,
        },
        Case {
            what: "an ACL on another resource leaves the default",
            acls: vec![a("payments", Literal, "User:bob", "*", Write, Allow)],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "literal allow",
            acls: vec![a("orders", Literal, "User:alice", "*", Write, Allow)],
            allow_if_no_acl: false,
            op: Write,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "DENY beats ALLOW",
            acls: vec![
                a("orders", Literal, "User:alice", "*", Write, Allow),
                a("orders", Literal, "User:alice", "*", Write, Deny),
            ],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Deny,
        },
        Case {
            what: "a wildcard-resource DENY beats a literal ALLOW",
            acls: vec![
                a("orders", Literal, "User:alice", "*", Write, Allow),
                a("*", Literal, "User:*", "*", Write, Deny),
            ],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Deny,
        },
        Case {
            what: "ALL matches every operation",
            acls: vec![a("orders", Literal, "User:alice", "*", All, Allow)],
            allow_if_no_acl: false,
            op: AlterConfigs,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "DENY ALL denies everything",
            acls: vec![
                a("orders", Literal, "User:alice", "*", Read, Allow),
                a("orders", Literal, "User:alice", "*", All, Deny),
            ],
            allow_if_no_acl: true,
            op: Read,
            resource: t("orders"),
            expect: Decision::Deny,
        },
        Case {
            what: "READ implies DESCRIBE",
            acls: vec![a("orders", Literal, "User:alice", "*", Read, Allow)],
            allow_if_no_acl: false,
            op: Describe,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "WRITE, DELETE, ALTER imply DESCRIBE too",
            acls: vec![a("orders", Literal, "User:alice", "*", Alter, Allow)],
            allow_if_no_acl: false,
            op: Describe,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "DESCRIBE implies nothing else",
            acls: vec![a("orders", Literal, "User:alice", "*", Describe, Allow)],
            allow_if_no_acl: true,
            op: Read,
            resource: t("orders"),
            expect: Decision::Deny,
        },
        Case {
            what: "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
            acls: vec![a("orders", Literal, "User:alice", "*", AlterConfigs, Allow)],
            allow_if_no_acl: false,
            op: DescribeConfigs,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "a DENY READ does not deny DESCRIBE",
            acls: vec![
                a("orders", Literal, "User:alice", "*", Describe, Allow),
                a("orders", Literal, "User:alice", "*", Read, Deny),
            ],
            allow_if_no_acl: false,
            op: Describe,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "prefixed pattern",
            acls: vec![a("ord", Prefixed, "User:alice", "*", Write, Allow)],
            allow_if_no_acl: false,
            op: Write,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "a prefixed pattern of the whole name",
            acls: vec![a("orders", Prefixed, "User:alice", "*", Write, Allow)],
            allow_if_no_acl: false,
            op: Write,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "a literal that is only a prefix does not apply",
            acls: vec![a("ord", Literal, "User:alice", "*", Write, Allow)],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "a prefixed DENY applies",
            acls: vec![
                a("orders", Literal, "User:alice", "*", Write, Allow),
                a("or", Prefixed, "User:alice", "*", Write, Deny),
            ],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Deny,
        },
        Case {
            what: "a longer prefixed pattern does not apply",
            acls: vec![a("orders-eu", Prefixed, "User:bob", "*", Write, Allow)],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "User:* matches every user",
            acls: vec![a("orders", Literal, "User:*", "*", Write, Allow)],
            allow_if_no_acl: false,
            op: Write,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "host must match",
            acls: vec![a("orders", Literal, "User:alice", "10.0.0.2", Write, Allow)],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Deny,
        },
        Case {
            what: "the caller's host matches",
            acls: vec![a("orders", Literal, "User:alice", "10.0.0.1", Write, Deny)],
            allow_if_no_acl: true,
            op: Write,
            resource: t("orders"),
            expect: Decision::Deny,
        },
        Case {
            what: "resource types are separate",
            acls: vec![acl(Group, "orders", Literal, "User:alice", "*", Read, Deny)],
            allow_if_no_acl: true,
            op: Read,
            resource: t("orders"),
            expect: Decision::Allow,
        },
        Case {
            what: "cluster ACL",
            acls: vec![acl(
                Cluster,
                CLUSTER_NAME,
                Literal,
                "User:alice",
                "*",
                Create,
                Allow,
            )],
            allow_if_no_acl: false,
            op: Create,
            resource: (Cluster, CLUSTER_NAME),
            expect: Decision::Allow,
        },
    ];
    for case in cases {
        let settings = AuthorizerSettings {
            super_users: Default::default(),
            allow_if_no_acl: case.allow_if_no_acl,
        };
        let got = authorize(
            &settings,
            &table(&case.acls),
            &ALICE,
            case.op,
            case.resource.0,
            case.resource.1,
        );
        assert_eq!(got, case.expect, "{}", case.what);
    }
}

#[test]
fn super_users_are_always_allowed() {
    let acls = table(&[acl(Topic, "*", Literal, "User:*", "*", All, Deny)]);
    let settings = AuthorizerSettings {
        super_users: ["User:alice".to_string()].into(),
        allow_if_no_acl: false,
    };
    assert_eq!(
        authorize(&settings, &acls, &ALICE, Write, Topic, "x"),
        Decision::Allow
    );
    let bob = Caller {
        principal: "User:bob",
        host: "10.0.0.1",
    };
    assert_eq!(
        authorize(&settings, &acls, &bob, Write, Topic, "x"),
        Decision::Deny
    );
}

#[test]
fn authorized_operations_follow_the_acls() {
    let settings = AuthorizerSettings::default();
    let acls = table(&[acl(Topic, "t", Literal, "User:alice", "*", Read, Allow)]);
    let ops = authorized_operations(&settings, &acls, &ALICE, Topic, "t");
    assert_eq!(ops, 1 << Read.code() | 1 << Describe.code());
    assert_eq!(all_operations(Topic), 0b1101_1111_1000);
    let open = AuthorizerSettings {
        allow_if_no_acl: true,
        ..settings
    };
    assert_eq!(
        authorized_operations(&open, &AclTable::default(), &ALICE, Topic, "t"),
        all_operations(Topic)
    );
}

#[test]
fn codes_round_trip() {
    for op in Operation::EVERY {
        assert_eq!(Operation::from_code(op.code()), Some(op));
    }
    assert_eq!(All.code(), 2);
    assert_eq!(TwoPhaseCommit.code(), 15);
    assert_eq!(Operation::from_code(1), None);
    assert_eq!(Operation::from_code(0), None);
    assert_eq!(Operation::from_code(16), None);
    assert_eq!(Operation::from_code(-3), None);
    for t in ResourceType::ALL {
        assert_eq!(ResourceType::from_code(t.code()), Some(t));
    }
    assert_eq!(ResourceType::from_code(1), None);
}

#[test]
fn filters_match_as_kafka_filters_do() {
    let literal = acl(Topic, "orders", Literal, "User:a", "*", Read, Allow);
    let wildcard = acl(Topic, "*", Literal, "User:a", "*", Read, Allow);
    let prefixed = acl(Topic, "ord", Prefixed, "User:b", "*", Write, Deny);
    let other = acl(Group, "orders", Literal, "User:a", "*", Read, Allow);
    let all = [&literal, &wildcard, &prefixed, &other];
    let select = |f: AclFilter| -> Vec<&AclBinding> {
        all.iter().copied().filter(|b| f.matches(b)).collect()
    };
    let named = |pattern| AclFilter {
        resource_type: Some(Topic),
        resource_name: Some("orders".into()),
        pattern,
        ..AclFilter::any()
    };
    assert_eq!(select(AclFilter::any()).len(), 4);
    assert_eq!(
        select(named(PatternFilter::Match)),
        vec![&literal, &wildcard, &prefixed]
    );
    // ANY with a name: exactly that name, any pattern type.
    assert_eq!(select(named(PatternFilter::Any)), vec![&literal]);
    assert_eq!(
        select(named(PatternFilter::Exactly(Literal))),
        vec![&literal]
    );
    assert!(select(named(PatternFilter::Exactly(Prefixed))).is_empty());
    assert_eq!(
        select(AclFilter {
            operation: Some(Write),
            permission: Some(Deny),
            ..AclFilter::any()
        }),
        vec![&prefixed]
    );
    assert_eq!(
        select(AclFilter {
            principal: Some("User:a".into()),
            resource_type: Some(Group),
            ..AclFilter::any()
        }),
        vec![&other]
    );
    // UNKNOWN fields are refused, ANY (1) is a wildcard.
    assert!(AclFilter::from_codes(0, None, 1, None, None, 1, 1).is_err());
    assert!(AclFilter::from_codes(1, None, 0, None, None, 1, 1).is_err());
    assert!(AclFilter::from_codes(1, None, 1, None, None, 0, 1).is_err());
    assert_eq!(
        AclFilter::from_codes(1, None, 1, None, None, 1, 1),
        Ok(AclFilter::any())
    );
}

#[test]
fn new_bindings_are_checked() {
    let ok = RawBinding {
        resource_type: 2,
        resource_name: "t",
        pattern_type: 3,
        principal: "User:a",
        host: "*",
        operation: 3,
        permission: 3,
    };
    assert!(AclBinding::from_raw(&ok).is_ok());
    let bad = [
        RawBinding {
            resource_type: 1,
            ..ok.clone()
        },
        RawBinding {
            pattern_type: 2,
            ..ok.clone()
        },
        RawBinding {
            operation: 1,
            ..ok.clone()
        },
        RawBinding {
            permission: 1,
            ..ok.clone()
        },
        RawBinding {
            resource_name: "",
            ..ok.clone()
        },
        RawBinding {
            principal: "alice",
            ..ok.clone()
        },
        RawBinding {
            resource_type: 4,
            resource_name: "other",
            ..ok.clone()
        },
    ];
    for raw in bad {
        assert!(AclBinding::from_raw(&raw).is_err(), "{raw:?}");
    }
}

#[test]
fn the_table_indexes_and_removes() {
    let a = acl(Topic, "t", Literal, "User:a", "*", Read, Allow);
    let mut t = AclTable::default();
    let id = Uuid::from_u64_pair(1, 1);
    t.insert(id, a.clone());
    assert!(t.contains(&a));
    assert_eq!(t.len(), 1);
    t.remove(id);
    assert!(!t.contains(&a));
    assert!(t.is_empty());
    assert_eq!(t, AclTable::default());
}
