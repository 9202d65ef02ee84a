//! Node to node: the quorum's RPCs and DescribeQuorum (`quorum_rpc`), the broker sessions and
//! AlterPartition on the active controller (`broker_rpc`), and the relay of metadata changes
//! from a client listener to the active controller (`forward`).

pub(crate) mod broker_rpc;
pub(crate) mod cordoned_dirs;
pub(crate) mod forward;
pub(crate) mod quorum_rpc;
pub(crate) mod replica_logs;
pub(crate) mod timed_out;
