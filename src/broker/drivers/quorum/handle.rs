//! The broker's handle on its quorum driver, as `Broker` holds it, and what passes through it
//! (the driver's inputs, the core's answers, the controller as this node sees it). Kept apart
//! from the driver (`super`), which takes the broker, so that the broker's definition
//! (`shared`) holds the handle without importing the driver.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::sync::watch;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::{mpsc, oneshot};

use crate::broker::drivers::quorum_status::QuorumStatus;
use crate::broker::peer::Link;
use crate::io::Io;
use crate::raft::{Message, NodeId, SnapshotMeta};

/// The core's answer to an inbound request.
#[derive(Debug)]
pub enum Answer {
    /// A response message, with the fetched batches for a fetch.
    Message(Message, Option<Bytes>),
    /// The request could not be processed: answer this error code.
    Error(ResponseError),
}

/// Why a proposal was not committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposeError {
    /// This node is not the active controller (or stopped being it before the commit).
    NotController,
    /// The quorum driver stopped (storage failure or shutdown).
    Stopped,
}

pub(super) enum Input {
    Request {
        from: NodeId,
        message: Message,
        reply: oneshot::Sender<Answer>,
    },
    Response {
        from: NodeId,
        message: Message,
    },
    Propose {
        values: Vec<Bytes>,
        reply: oneshot::Sender<Result<u64, ProposeError>>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    /// The applier wrote a snapshot of the image.
    SnapshotTaken(SnapshotMeta),
    /// A request a fault point held back (`quorum_rival_vote_hold`), read now and never held
    /// again.
    #[cfg(any(madsim, test))]
    Held {
        from: NodeId,
        message: Message,
        reply: oneshot::Sender<Answer>,
    },
}

/// The broker's handle on its quorum driver.
pub struct QuorumHandle {
    pub(super) node_id: NodeId,
    pub(super) tx: mpsc::Sender<Input>,
    pub(super) status: Mutex<QuorumStatus>,
    /// Leader whose LeaderChange this node has applied: the controller may write.
    pub(super) active: AtomicBool,
    /// The quorum's own connections (votes, fetches): never behind a slow request.
    pub(super) links: BTreeMap<NodeId, Link>,
    /// Separate connections for forwarded requests and broker sessions, which wait for
    /// commits: a peer serves one connection's requests in order, so sharing would hold
    /// fetches behind them past the fetch timeout.
    pub(super) request_links: BTreeMap<NodeId, Link>,
    pub(super) voters: BTreeMap<NodeId, SocketAddr>,
    /// The controller as this node sees it, changed at every leader change and when the
    /// leader becomes active: what a forwarded request waits on.
    pub(super) controller: watch::Sender<ControllerView>,
    /// (epoch, monotonic ms): this node, leading that epoch, made a proposal then that the
    /// quorum committed — proof it still led at that time (`Broker::confirm_leadership`).
    pub(super) confirmed: Mutex<Option<(u32, u64)>>,
}

/// Who the controller is, as this node sees it: the quorum leader (if known), its epoch, and
/// whether this node is the active controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerView {
    pub leader: Option<NodeId>,
    pub epoch: u32,
    pub active: bool,
}

impl QuorumHandle {
    /// Changes of [`ControllerView`] (leader elected, lost, or now active).
    pub fn controller_changes(&self) -> watch::Receiver<ControllerView> {
        self.controller.subscribe()
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    pub fn status(&self) -> QuorumStatus {
        self.status.lock().unwrap().clone()
    }

    /// Whether this node's leadership of the current epoch was confirmed by a commit of a
    /// proposal made at or after `since_ms` (monotonic). Always true for a sole voter, which
    /// no other node can depose.
    pub fn leadership_confirmed_since(&self, since_ms: u64) -> bool {
        confirmed_since(
            self.voters.len() <= 1,
            self.leader_epoch(),
            *self.confirmed.lock().unwrap(),
            since_ms,
        )
    }

    /// A proposal made at `at_ms` (monotonic) while leading `epoch` was committed.
    pub fn note_confirmed(&self, epoch: u32, at_ms: u64) {
        let mut confirmed = self.confirmed.lock().unwrap();
        let newer = match *confirmed {
            Some((e, at)) => (epoch, at_ms) > (e, at),
            None => true,
        };
        if newer {
            *confirmed = Some((epoch, at_ms));
        }
    }

    /// Whether this node is the active controller: the quorum leader, with everything before
    /// its epoch applied.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// A link to the leader for requests that wait for commits (forwarding, broker
    /// sessions), with the epoch it leads, when a leader other than this node is known.
    pub fn leader_link(&self) -> Option<(&Link, u32)> {
        let view = *self.controller.borrow();
        let leader = view.leader?;
        (leader != self.node_id)
            .then(|| self.request_links.get(&leader))
            .flatten()
            .map(|link| (link, view.epoch))
    }

    /// The epoch in which this node leads the quorum (active controller yet or not), if it does.
    pub fn leader_epoch(&self) -> Option<u32> {
        let view = *self.controller.borrow();
        (view.leader == Some(self.node_id)).then_some(view.epoch)
    }

    /// The epoch in which this node is the active controller, if it is one.
    pub fn active_epoch(&self) -> Option<u32> {
        let view = *self.controller.borrow();
        view.active.then_some(view.epoch)
    }

    pub fn voters(&self) -> &BTreeMap<NodeId, SocketAddr> {
        &self.voters
    }

    /// Hands an inbound request to the core; the receiver yields its answer.
    pub fn request(&self, from: NodeId, message: Message) -> oneshot::Receiver<Answer> {
        let (reply, rx) = oneshot::channel();
        if let Err(
            mpsc::error::TrySendError::Full(Input::Request { reply, .. })
            | mpsc::error::TrySendError::Closed(Input::Request { reply, .. }),
        ) = self.tx.try_send(Input::Request {
            from,
            message,
            reply,
        }) {
            let _ = reply.send(Answer::Error(ResponseError::RequestTimedOut));
        }
        rx
    }

    /// Proposes records (JSON values) as one batch; resolves once they are committed and
    /// applied here, with the offset after them.
    pub async fn propose(&self, values: Vec<Bytes>) -> Result<u64, ProposeError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Input::Propose { values, reply })
            .await
            .map_err(|_| ProposeError::Stopped)?;
        rx.await.unwrap_or(Err(ProposeError::Stopped))
    }

    /// Resigns leadership (EndQuorumEpoch) and closes the log cleanly; bounded by `limit`.
    pub async fn shutdown(&self, io: &Io, limit: Duration) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Input::Shutdown { reply }).await.is_ok() {
            let _ = io.timeout(limit, rx).await;
        }
    }
}

/// [`QuorumHandle::leadership_confirmed_since`]: a sole voter always; otherwise only a leader
/// whose last confirmed proposal was made in its current epoch at or after `since_ms`.
fn confirmed_since(
    sole_voter: bool,
    leading: Option<u32>,
    confirmed: Option<(u32, u64)>,
    since_ms: u64,
) -> bool {
    if sole_voter {
        return true;
    }
    match (leading, confirmed) {
        (Some(epoch), Some((e, at))) => e == epoch && at >= since_ms,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::confirmed_since;

    #[test]
    fn leadership_is_confirmed_only_by_a_recent_commit_of_the_current_epoch() {
        // A sole voter cannot be deposed.
        assert!(confirmed_since(true, None, None, 1_000));
        // Never confirmed, or not leading.
        assert!(!confirmed_since(false, Some(3), None, 1_000));
        assert!(!confirmed_since(false, None, Some((3, 5_000)), 1_000));
        // Confirmed in this epoch, recently enough.
        assert!(confirmed_since(false, Some(3), Some((3, 1_000)), 1_000));
        assert!(confirmed_since(false, Some(3), Some((3, 2_000)), 1_000));
        // Too long ago: a new leader may have been elected since.
        assert!(!confirmed_since(false, Some(3), Some((3, 999)), 1_000));
        // Confirmed in an earlier epoch (this node led before, lost it, leads again).
        assert!(!confirmed_since(false, Some(4), Some((3, 5_000)), 1_000));
    }
}
