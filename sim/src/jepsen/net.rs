//! The suite's network: each node in its own Linux network namespace (`wj-n1`…), joined to a
//! bridge in the root namespace (`wj-br`, 10.77.0.1, where the clients run) by a veth pair, so
//! that faults act on real packets: nftables rules in a node's namespace cut it off from some
//! peers (or everyone), `tc netem` on its interface delays or drops what it sends. Needs root.
//! Every command is bounded (one `ip`/`nft`/`tc` call) and set-up starts by removing what a
//! killed earlier run may have left.

use std::net::Ipv4Addr;
use std::process::Command;

pub const BRIDGE: &str = "wj-br";
/// The root namespace's address on the bridge: where the clients connect from.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const TABLE: &str = "weir_jepsen";

pub fn namespace(index: usize) -> String {
    format!("wj-n{}", index + 1)
}

pub fn node_ip(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, 0, 11 + index as u8)
}

/// Runs one command; its stderr in the error.
pub fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `program args` inside node `index`'s namespace.
pub fn in_node(index: usize, program: &str, args: &[&str]) -> Result<(), String> {
    let ns = namespace(index);
    let mut all = vec!["netns", "exec", ns.as_str(), program];
    all.extend_from_slice(args);
    run("ip", &all)
}

/// Removes the namespaces and the bridge (best effort: whatever exists).
pub fn teardown(nodes: usize) {
    for i in 0..nodes.max(9) {
        let _ = run("ip", &["netns", "del", &namespace(i)]);
        let _ = run("ip", &["link", "del", &format!("wj-v{}", i + 1)]);
    }
    let _ = run("ip", &["link", "del", BRIDGE]);
}

/// Builds the bridge and one namespace per node, with an empty nftables table in each.
pub fn setup(nodes: usize) -> Result<(), String> {
    teardown(nodes);
    run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
    run(
        "ip",
        &["addr", "add", &format!("{CLIENT_IP}/24"), "dev", BRIDGE],
    )?;
    run("ip", &["link", "set", BRIDGE, "up"])?;
    for i in 0..nodes {
        let ns = namespace(i);
        let veth = format!("wj-v{}", i + 1);
        run("ip", &["netns", "add", &ns])?;
        run(
            "ip",
            &[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ],
        )?;
        run("ip", &["link", "set", &veth, "master", BRIDGE])?;
        run("ip", &["link", "set", &veth, "up"])?;
        in_node(i, "ip", &["link", "set", "lo", "up"])?;
        in_node(
            i,
            "ip",
            &["addr", "add", &format!("{}/24", node_ip(i)), "dev", "eth0"],
        )?;
        in_node(i, "ip", &["link", "set", "eth0", "up"])?;
        let rules = format!(
            "table inet {TABLE} {{\n chain input {{ type filter hook input priority 0; }}\n chain output {{ type filter hook output priority 0; }}\n}}\n"
        );
        nft_script(i, &rules)?;
    }
    Ok(())
}

fn nft_script(index: usize, script: &str) -> Result<(), String> {
    let path = std::env::temp_dir().join(format!("weir-jepsen-nft-{}.nft", std::process::id()));
    std::fs::write(&path, script).map_err(|e| format!("{}: {e}", path.display()))?;
    let result = in_node(index, "nft", &["-f", &path.display().to_string()]);
    let _ = std::fs::remove_file(&path);
    result
}

/// Which packets a cut drops at a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// To and from these addresses.
    Both,
    /// Only what the node sends to them: it hears but cannot speak.
    Out,
}

/// Drops node `index`'s traffic with `peers` (every packet, established connections too).
pub fn cut(index: usize, peers: &[Ipv4Addr], how: Cut) -> Result<(), String> {
    let mut script = String::new();
    for p in peers {
        script.push_str(&format!("add rule inet {TABLE} output ip daddr {p} drop\n"));
        if how == Cut::Both {
            script.push_str(&format!("add rule inet {TABLE} input ip saddr {p} drop\n"));
        }
    }
    nft_script(index, &script)
}

/// Loss: netem when the kernel has it, else nftables' random numbers dropping that share of
/// what node `index` sends and receives (kernels without `sch_netem`, as some containers).
pub fn loss(index: usize, rate: f64) -> Result<(), String> {
    if netem(index, None, Some(rate)).is_ok() {
        return Ok(());
    }
    let per_mille = (rate.clamp(0.0, 1.0) * 1000.0).round() as u32;
    let script = format!(
        "add rule inet {TABLE} output numgen random mod 1000 < {per_mille} drop\n\
         add rule inet {TABLE} input numgen random mod 1000 < {per_mille} drop\n"
    );
    nft_script(index, &script)
}

/// Delay (ms, with 20 % jitter) or loss (a rate in 0..1) on everything node `index` sends.
/// Needs the kernel's `sch_netem`.
pub fn netem(index: usize, delay_ms: Option<u64>, loss: Option<f64>) -> Result<(), String> {
    let mut args: Vec<String> = ["qdisc", "replace", "dev", "eth0", "root", "netem"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(d) = delay_ms {
        args.extend(["delay".into(), format!("{d}ms"), format!("{}ms", d / 5)]);
    }
    if let Some(l) = loss {
        args.extend(["loss".into(), format!("{:.1}%", l * 100.0)]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    in_node(index, "tc", &args)
}

/// Lifts every cut and every netem of node `index`.
pub fn heal(index: usize) -> Result<(), String> {
    let _ = in_node(index, "tc", &["qdisc", "del", "dev", "eth0", "root"]);
    in_node(index, "nft", &["flush", "chain", "inet", TABLE, "input"])?;
    in_node(index, "nft", &["flush", "chain", "inet", TABLE, "output"])
}
