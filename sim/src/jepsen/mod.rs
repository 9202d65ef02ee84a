//! The real-process fault suite (Jepsen-style): the simulator's scenarios against real
//! `weir serve` processes in Linux network namespaces, with real faults (kill -9,
//! SIGSTOP/SIGCONT, nftables partitions, netem latency and loss), the simulator's own clients
//! over real sockets, a history file in the simulator's format (`history_file`) and the
//! simulator's checker on it. `weir-jepsen` is its command; `scripts/jepsen` the wrapper that
//! builds, cleans up and runs the CI slice or the long run (docs/JEPSEN.md). Root only.

pub mod clients;
pub mod nemesis;
pub mod net;
pub mod nodes;
pub mod run;
