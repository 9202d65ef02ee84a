//! A connection replayed from bytes (for the fuzzer, `fuzz/`): the peer wrote `input` and then
//! closed its side; what the broker writes back is kept. No socket, no waiting: reads hand out
//! the input at once, then end of stream.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(crate) struct ReplayedStream {
    input: Bytes,
    written: Arc<Mutex<Vec<u8>>>,
}

impl ReplayedStream {
    pub(crate) fn new(input: Bytes, written: Arc<Mutex<Vec<u8>>>) -> ReplayedStream {
        ReplayedStream { input, written }
    }
}

impl AsyncRead for ReplayedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = buf.remaining().min(self.input.len());
        buf.put_slice(&self.input[..n]);
        self.input.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ReplayedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written.lock().unwrap().extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
