//! The active controller's producer ids: ids are reserved in blocks in the metadata log
//! (`Controller::reserve_producer_ids`) before any of them is given out, and a cursor hands
//! them out one by one. A new active controller (a new quorum epoch) starts past every block
//! any earlier one reserved, read from the image.

use std::io;
use std::sync::Mutex;

use crate::broker::{Broker, CommitError};

/// The next id to hand out, and the quorum epoch in which it was last moved past the image's
/// reserved blocks (`None`: never).
pub(crate) struct ProducerIds {
    cursor: Mutex<(i64, Option<u32>)>,
}

impl ProducerIds {
    /// Starts at `reserved`, the end of the blocks the image says were reserved.
    pub(crate) fn new(reserved: i64) -> ProducerIds {
        assert!(reserved >= 0, "negative producer id cursor {reserved}");
        ProducerIds {
            cursor: Mutex::new((reserved, None)),
        }
    }

    /// Takes the next id. In quorum epoch `epoch` (a cluster), the first id taken is past
    /// `reserved`, every block reserved before this epoch began.
    fn take(&self, epoch: Option<u32>, reserved: i64) -> i64 {
        let mut cursor = self.cursor.lock().unwrap();
        let (next, seen) = &mut *cursor;
        if let Some(epoch) = epoch {
            if *seen != Some(epoch) {
                *next = (*next).max(reserved);
                *seen = Some(epoch);
            }
        }
        let id = *next;
        *next = id.checked_add(1).expect("producer ids exhausted");
        id
    }
}

impl Broker {
    /// A new producer id, never handed out before: ids are reserved in blocks in the metadata
    /// log before any of them is given out.
    pub(crate) async fn allocate_producer_id(&self) -> io::Result<i64> {
        let allocated = self
            .change_metadata(false, |controller, image| {
                let epoch = Some(self.quorum.status().epoch);
                let id = self.producer_ids.take(epoch, image.producer_ids_reserved());
                let reserve = controller.reserve_producer_ids(image, id);
                Ok((reserve.into_iter().collect(), id))
            })
            .await;
        match allocated {
            Ok(id) => Ok(id),
            Err(CommitError::Storage(e)) => Err(e),
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_epoch_starts_past_the_reserved_blocks() {
        let ids = ProducerIds::new(0);
        assert_eq!(ids.take(None, 1000), 0);
        assert_eq!(ids.take(None, 1000), 1);
        // A cluster's first take in an epoch jumps past what the image reserved.
        assert_eq!(ids.take(Some(3), 1000), 1000);
        assert_eq!(ids.take(Some(3), 2000), 1001);
        assert_eq!(ids.take(Some(4), 2000), 2000);
        // Never backwards.
        assert_eq!(ids.take(Some(5), 10), 2001);
    }
}
