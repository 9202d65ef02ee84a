//! `--output json` on every read command of `weir`, against one node: each command exits 0
//! and its standard output is exactly one JSON document (what a script parses), holding what
//! the node has (the topic, the group, the records). Also Kafka's spellings of options the
//! commands accept as aliases (`--bootstrap-server` everywhere, `--topic`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use weir::broker::Broker;
use weir::config::{parse_properties, ServerConfig};
use weir::io::Io;

mod common;

const TOPIC: &str = "json-topic";
const GROUP: &str = "json-group";
/// An authorizer, so `acls --list` has something to list (everyone allowed: no ACLs here).
const AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

fn weir(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("WEIR_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn ok(args: &[&str], stdin: Option<&str>) -> String {
    let out = weir(args, stdin);
    assert!(
        out.status.success(),
        "weir {}:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The command's standard output, parsed as one JSON document (nothing before or after it).
fn json(args: &[&str]) -> Value {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    let text = ok(&all, None);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "weir {}: not one JSON document ({e}):\n{text}",
            args.join(" ")
        )
    })
}

fn has(value: &Value, needle: &str) -> bool {
    value.to_string().contains(needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_command_prints_one_json_document() {
    let dir = common::temp_dir("cli-json", "node");
    let properties = dir.join("server.properties");
    std::fs::write(
        &properties,
        format!(
            "node.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={}\n\
             authorizer.class.name={AUTHORIZER}\nallow.everyone.if.no.acl.found=true\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let path = properties.to_str().unwrap();
    ok(&["format", "--config", path, "--random-cluster-id"], None);
    let props: BTreeMap<String, String> =
        parse_properties(&std::fs::read_to_string(&properties).unwrap()).unwrap();
    let running = Broker::start(ServerConfig::from_properties(&props).unwrap().0, Io::os())
        .await
        .unwrap();
    let server = running.local_addr.to_string();
    let s = server.as_str();

    // Something to read: a topic, two records, a group's committed offsets.
    ok(
        &[
            "topics",
            "--bootstrap-server",
            s,
            "create",
            "--topic",
            TOPIC,
        ],
        None,
    );
    ok(
        &["produce", "--bootstrap-server", s, TOPIC],
        Some("k1\tv1\nk2\tv2\n"),
    );
    ok(
        &[
            "groups",
            "--bootstrap-server",
            s,
            "reset-offsets",
            "--group",
            GROUP,
            "--topic",
            TOPIC,
            "--to",
            "latest",
        ],
        None,
    );
    let plan = dir.join("plan.json");
    std::fs::write(
        &plan,
        format!(
            r#"{{"version":1,"partitions":[{{"topic":"{TOPIC}","partition":0,"replicas":[1]}}]}}"#
        ),
    )
    .unwrap();
    let plan = plan.to_str().unwrap();

    let topics = json(&["topics", "--bootstrap-server", s, "list"]);
    assert!(has(&topics, TOPIC), "{topics}");
    let described = json(&[
        "topics",
        "--bootstrap-server",
        s,
        "describe",
        "--topic",
        TOPIC,
    ]);
    assert!(has(&described, TOPIC), "{described}");
    let groups = json(&["groups", "--bootstrap-server", s, "list"]);
    assert!(has(&groups, GROUP), "{groups}");
    let group = json(&[
        "groups",
        "--bootstrap-server",
        s,
        "describe",
        "--group",
        GROUP,
    ]);
    assert!(has(&group, TOPIC), "{group}");
    for args in [
        &[
            "configs",
            "--bootstrap-server",
            s,
            "--describe",
            "--entity-type",
            "topics",
            "--entity-name",
            TOPIC,
        ][..],
        &[
            "configs",
            "--bootstrap-server",
            s,
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "1",
            "--all",
        ],
        &[
            "configs",
            "--bootstrap-server",
            s,
            "--describe",
            "--topic",
            TOPIC,
        ],
        &["acls", "--bootstrap-server", s, "--list"],
        &[
            "metadata-quorum",
            "--bootstrap-server",
            s,
            "describe",
            "--status",
        ],
        &[
            "metadata-quorum",
            "--bootstrap-server",
            s,
            "describe",
            "--replication",
        ],
        &["transactions", "--bootstrap-server", s, "list"],
        &[
            "transactions",
            "--bootstrap-server",
            s,
            "find-hanging",
            "--broker-id",
            "1",
        ],
        &[
            "transactions",
            "--bootstrap-server",
            s,
            "describe-producers",
            "--topic",
            TOPIC,
            "--partition",
            "0",
        ],
        &["log-dirs", "--bootstrap-server", s, "--describe"],
        &["features", "--bootstrap-server", s, "describe"],
        &["reassign", "--bootstrap-server", s, "--list"],
        &["cluster", "status", "--bootstrap-server", s],
    ] {
        json(args);
    }
    let offsets = json(&["get-offsets", "--bootstrap-server", s, "--topic", TOPIC]);
    assert_eq!(offsets[0]["offset"], 2, "{offsets}");
    let verified = json(&[
        "reassign",
        "--bootstrap-server",
        s,
        "--verify",
        "--reassignment-json-file",
        plan,
    ]);
    assert_eq!(
        verified["partitions"][0]["state"], "completed",
        "{verified}"
    );
    let records = json(&["consume", "--bootstrap-server", s, "--topic", TOPIC]);
    assert_eq!(records[1]["key"], "k2", "{records}");
    assert_eq!(records[1]["value"], "v2", "{records}");

    running.broker.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
