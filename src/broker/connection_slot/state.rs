//! The connection counts and creation rates as `Broker` holds them. Kept apart from the driver
//! (`super`), which takes the broker, so that the broker's definition (`shared`) holds them
//! without importing the driver.

use std::sync::{Arc, Mutex};

use crate::quota::connections::{ConnectionCounts, CreationRates};
use crate::quota::QuotaWindows;

/// The counts and rates every listener of the broker shares.
pub(crate) struct ConnectionQuotas {
    pub(super) counts: ConnectionCounts,
    pub(super) rates: CreationRates,
}

pub(crate) type Counts = Arc<Mutex<ConnectionQuotas>>;

pub(crate) fn new_counts(windows: QuotaWindows) -> Counts {
    Arc::new(Mutex::new(ConnectionQuotas {
        counts: ConnectionCounts::default(),
        rates: CreationRates::new(windows),
    }))
}
