//! A TLS connection over any [`crate::io::Stream`], server side (listeners) or client side (the
//! broker's own connections to other nodes): rustls's sans-IO `Connection` pumped through the stream's `AsyncRead`/`AsyncWrite`, so the same code runs
//! on sockets and in the simulator. The result is itself a stream, so the connection loop reads
//! frames from it as from a plain socket.

use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::pki_types::CertificateDer;
use rustls::{ClientConnection, Connection, ServerConnection};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::io::BoxStream;

pub struct TlsStream {
    io: BoxStream,
    conn: Connection,
    /// close_notify queued (once, however often shutdown is polled).
    closing: bool,
    /// Records written to `io` and not yet flushed through it. An OS socket sends on write,
    /// but `AsyncWrite` promises nothing before `poll_flush` (the simulator's TCP stream sends
    /// only then): without it a handshake waits for an answer to a hello never sent.
    unflushed: bool,
}

/// Adapts the async stream to the blocking `Read`/`Write` rustls calls, turning `Pending` into
/// `WouldBlock` (the waker is registered by the poll underneath).
struct SyncIo<'a, 'b> {
    io: &'a mut BoxStream,
    cx: &'a mut Context<'b>,
}

impl Read for SyncIo<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut buf = ReadBuf::new(buf);
        match Pin::new(&mut *self.io).poll_read(self.cx, &mut buf) {
            Poll::Ready(Ok(())) => Ok(buf.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl Write for SyncIo<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match Pin::new(&mut *self.io).poll_flush(self.cx) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl TlsStream {
    /// Runs the server handshake on `io`. A failure (a plaintext request, a bad or missing client
    /// certificate...) still sends rustls's alert before the error returns.
    pub async fn accept(io: BoxStream, conn: ServerConnection) -> io::Result<TlsStream> {
        Self::handshake(io, Connection::Server(conn)).await
    }

    /// Runs the client handshake on `io` (the server's certificate is checked by `conn`'s
    /// verifier: trust store and, with `ssl.endpoint.identification.algorithm=https`, name).
    pub async fn connect(io: BoxStream, conn: ClientConnection) -> io::Result<TlsStream> {
        Self::handshake(io, Connection::Client(conn)).await
    }

    async fn handshake(io: BoxStream, conn: Connection) -> io::Result<TlsStream> {
        let mut stream = TlsStream {
            io,
            conn,
            closing: false,
            unflushed: false,
        };
        poll_fn(|cx| stream.poll_handshake(cx)).await?;
        Ok(stream)
    }

    /// The client's certificate chain (end entity first), if it sent one.
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.conn.peer_certificates()
    }

    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.flush_tls(cx)?.is_pending() {
                return Poll::Pending;
            }
            if !self.conn.is_handshaking() {
                return Poll::Ready(Ok(()));
            }
            match self.read_tls(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "peer closed during the TLS handshake",
                    )))
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            }
            self.process(cx)?;
        }
    }

    /// Decrypts what was read; on a TLS error, sends the alert (best effort) and fails.
    fn process(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if let Err(e) = self.conn.process_new_packets() {
            let _ = self.flush_tls(cx);
            return Err(tls_error(e));
        }
        Ok(())
    }

    fn read_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let mut sync = SyncIo {
            io: &mut self.io,
            cx,
        };
        match self.conn.read_tls(&mut sync) {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// Sends every pending TLS record; `Pending` while the stream takes no more.
    fn flush_tls(&mut self, cx: &mut Context<'_>) -> io::Result<Poll<()>> {
        while self.conn.wants_write() {
            let mut sync = SyncIo {
                io: &mut self.io,
                cx,
            };
            match self.conn.write_tls(&mut sync) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => self.unflushed = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Poll::Pending),
                Err(e) => return Err(e),
            }
        }
        if self.unflushed {
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(result) => result?,
                Poll::Pending => return Ok(Poll::Pending),
            }
            self.unflushed = false;
        }
        Ok(Poll::Ready(()))
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.conn.reader().read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            // Post-handshake records (tickets, alerts) go out as they come; a peer that is
            // slow to take them does not stop this read.
            let _ = this.flush_tls(cx)?;
            match this.read_tls(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    this.process(cx)?;
                    // Whatever was left to decrypt is read above; then end of stream.
                    return match this.conn.reader().read(buf.initialize_unfilled()) {
                        Ok(n) => {
                            buf.advance(n);
                            Poll::Ready(Ok(()))
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Ready(Ok(())),
                        Err(e) => Poll::Ready(Err(e)),
                    };
                }
                Poll::Ready(Ok(_)) => this.process(cx)?,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            let n = this.conn.writer().write(buf)?;
            let flushed = this.flush_tls(cx)?;
            if n > 0 {
                return Poll::Ready(Ok(n));
            }
            if flushed.is_pending() {
                return Poll::Pending;
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.writer().flush()?;
        if this.flush_tls(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closing {
            this.closing = true;
            this.conn.send_close_notify();
        }
        if this.flush_tls(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
