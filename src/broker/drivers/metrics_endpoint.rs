//! Starts the metrics endpoint when `weir.metrics.address` asks for one: binds it through the
//! `io` network like every listener and serves scrapes until the broker shuts down.

use std::sync::Arc;

use crate::broker::shared::Broker;
use crate::metrics::http::{self, Render};

pub(crate) async fn start(broker: &Arc<Broker>) -> anyhow::Result<()> {
    let Some((host, port)) = broker.config.metrics_address.clone() else {
        return Ok(());
    };
    let addr = broker.io.net.resolve(&host, port).await?;
    let listener = broker
        .io
        .net
        .bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot bind weir.metrics.address {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    tracing::info!(%bound, "metrics endpoint listening (GET /metrics)");
    // Weak: the endpoint never keeps a stopped broker alive.
    let weak = Arc::downgrade(broker);
    let render: Render =
        Arc::new(move || weak.upgrade().map(|b| b.metrics_text()).unwrap_or_default());
    let io = broker.io.clone();
    broker
        .io
        .spawn(http::serve(io, listener, render, broker.shutdown_signal()));
    Ok(())
}
