//! The metrics endpoint: a minimal HTTP/1.1 server over the `io` traits that answers
//! `GET /metrics` (Prometheus scrapes) and nothing else. One request per connection
//! (`Connection: close`), which Prometheus handles like any other target.
//!
//! Bounded like every listener of the broker: at most [`MAX_CONNECTIONS`] at once (more are
//! closed at once), a request head of at most [`MAX_HEAD`] bytes (431 past it), and
//! [`TIMEOUT`] for the whole exchange (a slow or silent client is dropped).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::sync::watch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::io::{BoxStream, Io, Listener};

pub const MAX_CONNECTIONS: usize = 16;
pub const MAX_HEAD: usize = 8 * 1024;
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Produces the body of a scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves `listener` until `shutdown` turns true.
pub async fn serve(
    io: Io,
    mut listener: Box<dyn Listener>,
    render: Render,
    mut shutdown: watch::Receiver<bool>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let accepted = tokio::select! {
            biased;
            _ = shutdown.changed() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                if open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                    tracing::debug!(%peer, "metrics endpoint: too many connections; closing");
                    continue;
                }
                open.fetch_add(1, Ordering::SeqCst);
                let (open, render, task_io) = (open.clone(), render.clone(), io.clone());
                io.spawn(async move {
                    if task_io
                        .timeout(TIMEOUT, exchange(stream, &render))
                        .await
                        .is_none()
                    {
                        tracing::debug!(%peer, "metrics endpoint: request timed out");
                    }
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "metrics endpoint: accept failed");
                io.clock.sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Reads one request head and writes the answer.
async fn exchange(mut stream: BoxStream, render: &Render) {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let complete = loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break true;
        }
        if head.len() > MAX_HEAD {
            break false;
        }
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    };
    let answer = if complete {
        respond(&head, render)
    } else {
        reply(
            431,
            "Request Header Fields Too Large",
            "text/plain",
            "request head too large\n",
        )
    };
    let _ = stream.write_all(&answer).await;
    let _ = stream.shutdown().await;
}

/// The answer to a complete request head.
pub fn respond(head: &[u8], render: &Render) -> Vec<u8> {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next(), parts.next(), parts.next());
    if !version.is_some_and(|v| v.starts_with("HTTP/1.")) || parts.next().is_some() {
        return reply(400, "Bad Request", "text/plain", "bad request line\n");
    }
    let path = target.unwrap_or("").split('?').next().unwrap_or("");
    match (method, path) {
        (Some("GET"), "/metrics") => reply(200, "OK", super::CONTENT_TYPE, &render()),
        (Some("GET"), "/") => reply(200, "OK", "text/plain", "Weir metrics: GET /metrics\n"),
        (Some("GET"), _) => reply(404, "Not Found", "text/plain", "not found; try /metrics\n"),
        _ => reply(405, "Method Not Allowed", "text/plain", "only GET\n"),
    }
}

fn reply(code: u16, reason: &str, content_type: &str, body: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}
