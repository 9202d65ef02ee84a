use std::sync::Arc;
use std::time::Duration;

use super::http::{respond, Render};
use super::*;

/// The value of the series `name{labels}` exactly as written (labels in the encoder's order).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn counters_render_with_exporter_names_and_move() {
    let m = Metrics::new();
    let before = render(&m, &Snapshot::default());
    assert_eq!(
        value(&before, "kafka_server_brokertopicmetrics_bytesin_total"),
        None
    );
    m.produced("t", 100, 3, false);
    m.produced("t", 50, 2, false);
    m.produced("u", 0, 0, true);
    let text = render(&m, &Snapshot::default());
    assert_eq!(
        value(
            &text,
            "kafka_server_brokertopicmetrics_bytesin_total{topic=\"t\"}"
        ),
        Some(150.0)
    );
    assert_eq!(
        value(&text, "kafka_server_brokertopicmetrics_bytesin_total"),
        Some(150.0)
    );
    assert_eq!(
        value(
            &text,
            "kafka_server_brokertopicmetrics_messagesin_total{topic=\"t\"}"
        ),
        Some(5.0)
    );
    assert_eq!(
        value(
            &text,
            "kafka_server_brokertopicmetrics_failedproducerequests_total{topic=\"u\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "kafka_server_brokertopicmetrics_totalproducerequests_total"
        ),
        Some(3.0)
    );
    // A series appears on its first use only: "t" never failed, nothing was fetched.
    assert_eq!(
        value(
            &text,
            "kafka_server_brokertopicmetrics_failedproducerequests_total{topic=\"t\"}"
        ),
        None
    );
    assert_eq!(
        value(&text, "kafka_server_brokertopicmetrics_bytesout_total"),
        None
    );
    m.fetched("t", 10, false);
    m.fetched("u", 5, false);
    m.fetched("t", 7, true);
    let text = render(&m, &Snapshot::default());
    assert_eq!(
        value(
            &text,
            "kafka_server_brokertopicmetrics_bytesout_total{topic=\"t\"}"
        ),
        Some(10.0)
    );
    assert_eq!(
        value(&text, "kafka_server_brokertopicmetrics_bytesout_total"),
        Some(15.0)
    );
    assert_eq!(
        value(
            &text,
            "kafka_server_brokertopicmetrics_replicationbytesout_total{topic=\"t\"}"
        ),
        Some(7.0)
    );
}

#[test]
fn request_times_are_histograms_per_api() {
    let m = Metrics::new();
    let times = RequestTimes {
        queue: Duration::from_micros(10),
        local: Duration::from_millis(2),
        remote: Duration::from_millis(30),
        send: Duration::from_micros(5),
    };
    m.request("Produce", 9, &times);
    m.request("Produce", 9, &times);
    m.request("FetchConsumer", 12, &RequestTimes::default());
    let text = render(&m, &Snapshot::default());
    assert_eq!(
        value(
            &text,
            "kafka_network_requestmetrics_requests_total{request=\"Produce\",version=\"9\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &text,
            "kafka_network_requestmetrics_totaltimems_count{request=\"Produce\"}"
        ),
        Some(2.0)
    );
    // 32 ms: above the 25 ms bound, within 50.
    assert_eq!(
        value(
            &text,
            "kafka_network_requestmetrics_totaltimems_bucket{request=\"Produce\",le=\"25\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &text,
            "kafka_network_requestmetrics_totaltimems_bucket{request=\"Produce\",le=\"50\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &text,
            "kafka_network_requestmetrics_remotetimems_count{request=\"FetchConsumer\"}"
        ),
        Some(1.0)
    );
}

#[test]
fn snapshot_gauges_render() {
    let s = Snapshot {
        under_replicated: 2,
        active_controller: true,
        raft_state: "Leader",
        groups: vec![("Stable", 1), ("Empty", 2)],
        groups_total: 3,
        lag: vec![LagGauge {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            committed: 5,
            lag: Some(7),
        }],
        ..Snapshot::default()
    };
    let text = render(&Metrics::new(), &s);
    assert_eq!(
        value(
            &text,
            "kafka_server_replicamanager_underreplicatedpartitions"
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &text,
            "kafka_controller_kafkacontroller_activecontrollercount"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "kafka_server_raftmetrics_current_state{current_state=\"leader\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "kafka_server_groupmetadatamanager_numgroupsempty"),
        Some(2.0)
    );
    assert_eq!(
        value(
            &text,
            "weir_consumergroup_lag{group=\"g\",topic=\"t\",partition=\"0\"}"
        ),
        Some(7.0)
    );
}

#[test]
fn isr_changes_count_by_direction() {
    let m = Metrics::new();
    m.isr_changed(3, 2);
    m.isr_changed(2, 3);
    m.isr_changed(2, 3);
    m.isr_changed(3, 3);
    let text = render(&m, &Snapshot::default());
    assert_eq!(
        value(&text, "kafka_server_replicamanager_isrshrinks_total"),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "kafka_server_replicamanager_isrexpands_total"),
        Some(2.0)
    );
}

fn status_of(answer: &[u8]) -> String {
    String::from_utf8_lossy(answer)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[test]
fn http_answers_get_metrics_and_refuses_the_rest() {
    let render: Render = Arc::new(|| "x 1\n".to_string());
    let ok = respond(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", &render);
    assert_eq!(status_of(&ok), "HTTP/1.1 200 OK");
    assert!(String::from_utf8_lossy(&ok).ends_with("\r\n\r\nx 1\n"));
    assert!(String::from_utf8_lossy(&ok).contains("Content-Length: 4\r\n"));
    let query = respond(b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n", &render);
    assert_eq!(status_of(&query), "HTTP/1.1 200 OK");
    assert_eq!(
        status_of(&respond(b"GET /other HTTP/1.1\r\n\r\n", &render)),
        "HTTP/1.1 404 Not Found"
    );
    assert_eq!(
        status_of(&respond(b"POST /metrics HTTP/1.1\r\n\r\n", &render)),
        "HTTP/1.1 405 Method Not Allowed"
    );
    assert_eq!(
        status_of(&respond(b"garbage\r\n\r\n", &render)),
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        status_of(&respond(b"\xff\xfe\r\n\r\n", &render)),
        "HTTP/1.1 400 Bad Request"
    );
}

#[test]
fn request_names_are_the_api_names_kafka_uses() {
    use kafka_protocol::messages::ApiKey;
    for key in [
        ApiKey::Vote,
        ApiKey::BrokerHeartbeat,
        ApiKey::Metadata,
        ApiKey::ApiVersions,
    ] {
        // Formatted once, then the same name every time.
        assert_eq!(super::request_name(key, None), format!("{key:?}"));
        assert_eq!(super::request_name(key, Some(1)), format!("{key:?}"));
    }
    assert_eq!(super::request_name(ApiKey::Fetch, Some(2)), "FetchFollower");
    assert_eq!(
        super::request_name(ApiKey::Fetch, Some(-1)),
        "FetchConsumer"
    );
    assert_eq!(super::request_name(ApiKey::Produce, None), "Produce");
}
