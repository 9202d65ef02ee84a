//! A Kafka frame is a big-endian i32 size followed by that many bytes. A negative or oversized
//! size means the peer is not speaking Kafka (or is hostile): the connection is closed, and the
//! limit keeps one bad frame from allocating gigabytes.

use std::fmt;
use std::io;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

#[derive(Debug)]
pub enum FrameError {
    Io(io::Error),
    /// The peer closed the connection in the middle of a frame.
    Truncated,
    Negative(i32),
    Oversized {
        size: usize,
        max: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "i/o error: {e}"),
            FrameError::Truncated => f.write_str("connection closed inside a frame"),
            FrameError::Negative(n) => write!(f, "negative frame size {n}"),
            FrameError::Oversized { size, max } => write!(
                f,
                "frame of {size} bytes exceeds the limit of {max} (socket.request.max.bytes)"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// Reads one frame's body. `Ok(None)` when the peer closed cleanly between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_size: usize,
) -> Result<Option<BytesMut>, FrameError> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match reader.read(&mut size[got..]).await {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(FrameError::Truncated),
            Ok(n) => got += n,
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    let size = i32::from_be_bytes(size);
    if size < 0 {
        return Err(FrameError::Negative(size));
    }
    let size = size as usize;
    if size > max_size {
        return Err(FrameError::Oversized {
            size,
            max: max_size,
        });
    }
    // Read into the spare capacity, never zeroed first (zeroing each body cost more than the
    // read itself in the simulator), and never past this frame: the next one stays buffered.
    let mut body = BytesMut::with_capacity(size);
    while body.len() < size {
        let remaining = size - body.len();
        match reader.read_buf(&mut (&mut body).limit(remaining)).await {
            Ok(0) => return Err(FrameError::Truncated),
            Ok(_) => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(Some(body))
}

/// Reserves the size prefix at the start of `buf`; fill the rest, then [`finish_frame`].
pub fn start_frame(buf: &mut BytesMut) {
    buf.clear();
    buf.put_i32(0);
}

/// Writes the size prefix reserved by [`start_frame`].
pub fn finish_frame(buf: &mut BytesMut) {
    let size = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&size.to_be_bytes());
}

/// Writes a finished frame and flushes (the simulated network delivers nothing before a flush).
pub async fn write_frame<W: AsyncWrite + Unpin>(writer: &mut W, frame: &[u8]) -> io::Result<()> {
    writer.write_all(frame).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn frames_round_trip_and_limits_hold() {
        run(async {
            let mut buf = BytesMut::new();
            start_frame(&mut buf);
            buf.put_slice(b"hello");
            finish_frame(&mut buf);
            let mut input: &[u8] = &buf;
            assert_eq!(
                &read_frame(&mut input, 100).await.unwrap().unwrap()[..],
                b"hello"
            );
            assert!(read_frame(&mut input, 100).await.unwrap().is_none());
            let mut big: &[u8] = &[0x7f, 0xff, 0xff, 0xff, 1, 2];
            assert!(matches!(
                read_frame(&mut big, 100).await,
                Err(FrameError::Oversized { .. })
            ));
            let mut neg: &[u8] = &[0xff, 0xff, 0xff, 0xff];
            assert!(matches!(
                read_frame(&mut neg, 100).await,
                Err(FrameError::Negative(-1))
            ));
            let mut cut: &[u8] = &[0, 0, 0, 9, 1, 2];
            assert!(matches!(
                read_frame(&mut cut, 100).await,
                Err(FrameError::Truncated)
            ));
            let mut half: &[u8] = &[0, 0];
            assert!(matches!(
                read_frame(&mut half, 100).await,
                Err(FrameError::Truncated)
            ));
        });
    }

    /// A frame read through a small `BufReader` (bodies larger than its buffer bypass it)
    /// takes exactly its own bytes: the next frame, buffered or not, is read whole after it.
    #[test]
    fn back_to_back_frames_through_a_small_buffer() {
        run(async {
            let mut wire = BytesMut::new();
            let bodies: Vec<Vec<u8>> = [0usize, 3, 100, 1, 37]
                .iter()
                .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
                .collect();
            for body in &bodies {
                let mut frame = BytesMut::new();
                start_frame(&mut frame);
                frame.put_slice(body);
                finish_frame(&mut frame);
                wire.put_slice(&frame);
            }
            let mut reader = tokio::io::BufReader::with_capacity(16, &wire[..]);
            for body in &bodies {
                let got = read_frame(&mut reader, 1000).await.unwrap().unwrap();
                assert_eq!(&got[..], &body[..]);
            }
            assert!(read_frame(&mut reader, 1000).await.unwrap().is_none());
        });
    }
}
