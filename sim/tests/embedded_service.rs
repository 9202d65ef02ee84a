//! Weir inside your own simulation, the worked example (`weir_sim::embed`): a small service
//! turns each order into one invoice while the brokers under it crash, lose power and are cut
//! off, all under one madsim seed. The service must neither lose nor double-process an order.
//!
//! The service is written the way such a service should be: each order's offset becomes its
//! invoice's key, sent with an idempotent producer (one batch per order, its sequence the
//! order's offset) and retried, unchanged, until acknowledged with acks=all, so a retry after a
//! lost answer or a leader move is written once. Run it with
//! `cargo test -p weir-sim --release --target-dir target/sim --config "build.rustflags=['--cfg','madsim']" --test embedded_service`
//! (`MADSIM_TEST_SEED=N` picks the seed; `MADSIM_TEST_NUM=N` runs N seeds).
#![cfg(madsim)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use madsim::runtime::Handle;
use weir::client::ClusterClient;
use weir::io::Io;
use weir::log::batch::{self, BatchBuilder};
use weir_sim::embed::{client_io, ClusterSpec, SimCluster};

const ORDERS: &str = "orders";
const INVOICES: &str = "invoices";
const COUNT: i64 = 300;
/// What the service spends on one order (so that the faults land while it works).
const PROCESSING: Duration = Duration::from_millis(25);
/// Simulated time the service has to invoice every order, faults included.
const BOUND: Duration = Duration::from_secs(240);

fn topic_configs() -> BTreeMap<String, String> {
    BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())])
}

/// Retries `f` (a fresh cluster client each time) until it succeeds or `tries` run out.
async fn retry<T, F, Fut>(io: &Io, bootstrap: &[SocketAddr], tries: u32, mut f: F) -> Option<T>
where
    F: FnMut(ClusterClient) -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..tries {
        if let Ok(c) = ClusterClient::connect(io, bootstrap.to_vec()).await {
            if let Some(v) = f(c).await {
                return Some(v);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// One record in a batch of its own, stamped `timestamp` (wall-clock ms, as real clients stamp
/// theirs: a broker expires an idle producer's deduplication state by its batches'
/// timestamps, `producer.id.expiration.ms`, so a batch stamped 0 loses it at the next restart).
fn one_record(
    key: &str,
    value: &str,
    producer: (i64, i16),
    sequence: i32,
    timestamp: i64,
) -> bytes::Bytes {
    let mut b = BatchBuilder::new(timestamp);
    b.push(Some(key.as_bytes()), Some(value.as_bytes()), timestamp);
    bytes::Bytes::from(b.finish(producer.0, producer.1, sequence))
}

/// Every record of partition 0 of `topic` up to its high watermark: (key, value) by offset.
async fn read_all(io: &Io, bootstrap: &[SocketAddr], topic: &str) -> Option<Vec<(i64, String)>> {
    let mut c = ClusterClient::connect(io, bootstrap.to_vec()).await.ok()?;
    let mut out = Vec::new();
    let mut next = 0;
    loop {
        let fetched = c
            .fetch(topic, 0, next, 1 << 20, Duration::from_millis(100))
            .await
            .ok()?;
        for item in batch::iter(&fetched.records) {
            let (at, header) = item.ok()?;
            let bytes = &fetched.records[at..at + header.total_len()];
            for r in batch::records(bytes, &header)?.ok()? {
                let key = String::from_utf8_lossy(r.key.unwrap_or_default()).into_owned();
                out.push((r.offset, key));
            }
            next = header.next_offset();
        }
        if next >= fetched.high_watermark {
            return Some(out);
        }
    }
}

/// The service: reads orders from `next`, writes one invoice per order, and publishes its
/// progress (the next order to invoice) in `done`.
async fn invoice_service(bootstrap: Vec<SocketAddr>, done: Arc<AtomicI64>) {
    let io = client_io();
    let producer = retry(&io, &bootstrap, 200, |mut c| async move {
        c.any().await.ok()?.init_producer_id().await.ok()
    })
    .await
    .expect("a producer id");
    let mut next = 0;
    while next < COUNT {
        let Ok(mut c) = ClusterClient::connect(&io, bootstrap.clone()).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let Ok(fetched) = c
            .fetch(ORDERS, 0, next, 1 << 20, Duration::from_millis(500))
            .await
        else {
            continue;
        };
        let mut orders = Vec::new();
        for item in batch::iter(&fetched.records) {
            let Ok((at, header)) = item else { break };
            let bytes = &fetched.records[at..at + header.total_len()];
            let Some(Ok(records)) = batch::records(bytes, &header) else {
                break;
            };
            for r in records.into_iter().filter(|r| r.offset >= next) {
                let value = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
                orders.push((r.offset, value));
            }
        }
        for (offset, order) in orders {
            tokio::time::sleep(PROCESSING).await;
            // The same batch (same sequence) until acknowledged: written once.
            let invoice = one_record(
                &offset.to_string(),
                &format!("invoice for {order}"),
                producer,
                offset as i32,
                io.clock.wall_ms(),
            );
            loop {
                match c.produce(INVOICES, 0, invoice.clone(), -1).await {
                    Ok(_) => break,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        if let Ok(fresh) = ClusterClient::connect(&io, bootstrap.clone()).await {
                            c = fresh;
                        }
                    }
                }
            }
            next = offset + 1;
            done.store(next, Ordering::SeqCst);
        }
    }
}

#[madsim::test]
async fn a_service_loses_and_doubles_nothing_while_brokers_fail() {
    // The brokers' own logs for one seed: `WEIR_SIM_LOG=debug MADSIM_TEST_SEED=N cargo test …`.
    if let Ok(filter) = std::env::var("WEIR_SIM_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .without_time()
            .try_init();
    }
    let handle = Handle::current();
    let cluster = SimCluster::start(ClusterSpec::default()).await.unwrap();
    let bootstrap = cluster.bootstrap();
    let clients = handle
        .create_node()
        .name("clients")
        .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 8, 1)))
        .build();
    // The topics, and every order written (acks=all, idempotent) before the service starts.
    let setup_bootstrap = bootstrap.clone();
    clients
        .spawn(async move {
            let io = client_io();
            for topic in [ORDERS, INVOICES] {
                let created = retry(&io, &setup_bootstrap, 100, |mut c| async move {
                    let r = c
                        .any()
                        .await
                        .ok()?
                        .create_topic(topic, 1, 3, &topic_configs())
                        .await;
                    (r.is_ok() || format!("{r:?}").contains("TopicAlreadyExists")).then_some(())
                })
                .await;
                assert!(created.is_some(), "topic {topic} not created");
            }
            let producer = retry(&io, &setup_bootstrap, 100, |mut c| async move {
                c.any().await.ok()?.init_producer_id().await.ok()
            })
            .await
            .unwrap();
            for n in 0..COUNT {
                let order = one_record(
                    "",
                    &format!("order-{n}"),
                    producer,
                    n as i32,
                    io.clock.wall_ms(),
                );
                let sent = retry(&io, &setup_bootstrap, 100, |mut c| {
                    let order = order.clone();
                    async move { c.produce(ORDERS, 0, order, -1).await.ok() }
                })
                .await;
                assert!(sent.is_some(), "order {n} not acknowledged");
            }
        })
        .await
        .unwrap();

    let done = Arc::new(AtomicI64::new(0));
    let service = handle
        .create_node()
        .name("invoice-service")
        .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 8, 2)))
        .build();
    let service_task = service.spawn(invoice_service(bootstrap.clone(), done.clone()));

    // The nemesis, Weir's faults in the caller's hands: a crash, a power loss, a cut-off node.
    let pause = |ms| tokio::time::sleep(Duration::from_millis(ms));
    pause(300).await;
    let at_first_fault = done.load(Ordering::SeqCst);
    cluster.kill(0);
    pause(2_000).await;
    cluster.restart(0);
    pause(1_500).await;
    cluster.isolate(1);
    pause(3_000).await;
    cluster.heal_network();
    pause(500).await;
    cluster.power_loss(2);
    pause(2_500).await;
    cluster.restart(2);
    let at_last_fault = done.load(Ordering::SeqCst);
    assert!(
        0 < at_first_fault && at_last_fault < COUNT,
        "the faults must land while the service works: {at_first_fault} invoiced at the first, \
         {at_last_fault} at the last"
    );

    let finished = tokio::time::timeout(BOUND, service_task).await;
    assert!(
        finished.is_ok(),
        "the service invoiced {} of {COUNT} orders within {BOUND:?}",
        done.load(Ordering::SeqCst)
    );
    // Every order invoiced once, in order.
    let invoices = clients
        .spawn(async move {
            let io = client_io();
            for _ in 0..100 {
                if let Some(all) = read_all(&io, &bootstrap, INVOICES).await {
                    if all.len() as i64 >= COUNT {
                        return all;
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            panic!("the invoices could not be read back");
        })
        .await
        .unwrap();
    let keys: Vec<String> = invoices.iter().map(|(_, k)| k.clone()).collect();
    let expected: Vec<String> = (0..COUNT).map(|n| n.to_string()).collect();
    assert_eq!(keys, expected, "each order invoiced exactly once, in order");
}
