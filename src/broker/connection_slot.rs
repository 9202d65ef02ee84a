//! The driver of the connection limits (`quota::connections`): a client connection holds a
//! slot while it is served; refused, it is closed at accept as Kafka closes it. Connections on
//! the controller listener (quorum and inter-node traffic) are not counted, so client load
//! never locks the nodes out of each other.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::broker::api::ListenerKind;
use crate::broker::Broker;
use crate::quota::connections::{ConnectionCounts, Refused};

pub(crate) type Counts = Arc<Mutex<ConnectionCounts>>;

/// A counted connection; dropping it frees the slot.
pub(crate) struct ConnectionSlot {
    counted: Option<(Counts, IpAddr)>,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        if let Some((counts, ip)) = self.counted.take() {
            counts.lock().unwrap().close(ip);
        }
    }
}

impl Broker {
    /// A slot for a connection accepted on `kind` from `ip`, or why it is refused.
    pub(crate) fn connection_slot(
        &self,
        kind: ListenerKind,
        ip: IpAddr,
    ) -> Result<ConnectionSlot, Refused> {
        if kind == ListenerKind::Controller {
            return Ok(ConnectionSlot { counted: None });
        }
        self.connections.lock().unwrap().open(ip)?;
        Ok(ConnectionSlot {
            counted: Some((self.connections.clone(), ip)),
        })
    }
}
