//! Kafka wire framing shared by the broker and the client: size-prefixed frames with a limit,
//! and header encoding. Message bodies come from the `kafka-protocol` crate; nothing below the
//! broker layer sees them.

pub mod frame;

pub use frame::{read_frame, write_frame, FrameError};
