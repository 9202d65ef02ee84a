//! Listener addresses, controller quorum addresses and listener security protocols.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv6Addr;

use super::{invalid, parse_list, ConfigError};

/// A listener address, e.g. `PLAINTEXT://127.0.0.1:9092`.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// Upper-cased, as Kafka normalises listener names.
    pub listener_name: String,
    /// Without brackets for IPv6. An empty host (`PLAINTEXT://:9092`) becomes `0.0.0.0`.
    pub host: String,
    /// 0 asks the OS for a free port.
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}",
            self.listener_name,
            HostPort(&self.host, self.port)
        )
    }
}

/// A controller quorum member from `controller.quorum.voters` (`1@127.0.0.1:9093`), or a
/// contact point from `controller.quorum.bootstrap.servers`, whose id is not known (-1).
#[derive(Debug, Clone, PartialEq)]
pub struct Voter {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Voter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.id >= 0 {
            write!(f, "{}@", self.id)?;
        }
        write!(f, "{}", HostPort(&self.host, self.port))
    }
}

struct HostPort<'a>(&'a str, u16);

impl fmt::Display for HostPort<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.contains(':') {
            write!(f, "[{}]:{}", self.0, self.1)
        } else {
            write!(f, "{}:{}", self.0, self.1)
        }
    }
}

const SECURITY_PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

/// Upper-cased, de-duplicated listener names.
pub(super) fn parse_names(value: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in parse_list(value).into_iter().map(str::to_ascii_uppercase) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

pub(super) fn parse_endpoints(key: &str, value: &str) -> Result<Vec<Endpoint>, ConfigError> {
    let mut endpoints: Vec<Endpoint> = Vec::new();
    for item in parse_list(value) {
        let bad = |reason: &str| invalid(key, value, format!("'{item}': {reason}"));
        let (name, address) = item
            .split_once("://")
            .ok_or_else(|| bad("expected NAME://host:port"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(bad(
                "listener name must be non-empty letters, digits, '_', '-' or '.'",
            ));
        }
        let (host, port) = parse_host_port(address).map_err(bad)?;
        let listener_name = name.to_ascii_uppercase();
        if endpoints.iter().any(|e| e.listener_name == listener_name) {
            return Err(invalid(
                key,
                value,
                format!("listener name '{listener_name}' is used twice"),
            ));
        }
        let host = if host.is_empty() {
            "0.0.0.0".to_string()
        } else {
            host
        };
        endpoints.push(Endpoint {
            listener_name,
            host,
            port,
        });
    }
    Ok(endpoints)
}

/// `listeners`: endpoints with unique names, and unique ports except that (as in Kafka) an
/// IPv4 and an IPv6 listener may share one.
pub(super) fn parse_listeners(value: &str) -> Result<Vec<Endpoint>, ConfigError> {
    let listeners = parse_endpoints("listeners", value)?;
    if listeners.is_empty() {
        return Err(invalid(
            "listeners",
            value,
            "must contain at least one listener",
        ));
    }
    for (i, a) in listeners.iter().enumerate() {
        for b in &listeners[i + 1..] {
            let same_family = a.host.contains(':') == b.host.contains(':');
            if a.port != 0 && a.port == b.port && same_family {
                let (x, y) = (&a.listener_name, &b.listener_name);
                let reason = format!("listeners '{x}' and '{y}' both use port {}", a.port);
                return Err(invalid("listeners", value, reason));
            }
        }
    }
    Ok(listeners)
}

/// Each listener's security protocol (upper case), through `listener.security.protocol.map`
/// or, without one, through Kafka's rule that a listener named after a protocol uses it (any
/// other name is PLAINTEXT). Map entries for listeners that are not configured may name any
/// protocol: Kafka's stock files map SSL and SASL names they never use.
pub(super) fn security_protocols(
    listeners: &[Endpoint],
    listeners_raw: &str,
    map_raw: Option<&str>,
) -> Result<BTreeMap<String, (&'static str, String)>, ConfigError> {
    const MAP_KEY: &str = "listener.security.protocol.map";
    let map = match map_raw {
        Some(raw) => Some((raw, parse_protocol_map(raw)?)),
        None => None,
    };
    let _ = listeners_raw;
    let mut out = BTreeMap::new();
    for listener in listeners {
        let name = &listener.listener_name;
        let (key, protocol) = match &map {
            Some((raw, map)) => {
                let reason = || format!("no security protocol for listener '{name}'");
                let protocol = map
                    .get(name)
                    .ok_or_else(|| invalid(MAP_KEY, raw, reason()))?;
                (MAP_KEY, protocol.clone())
            }
            None => {
                let implied = SECURITY_PROTOCOLS.iter().find(|p| *p == name).copied();
                ("listeners", implied.unwrap_or("PLAINTEXT").to_string())
            }
        };
        out.insert(name.clone(), (key, protocol));
    }
    Ok(out)
}

/// `host:port`, `[ipv6]:port`, or an unbracketed IPv6 address followed by `:port` (Kafka's
/// pattern allows it). The host may be empty.
pub(super) fn parse_host_port(address: &str) -> Result<(String, u16), &'static str> {
    let (host, port) = match address.strip_prefix('[') {
        Some(rest) => {
            let (host, after) = rest
                .split_once(']')
                .ok_or("missing ']' after IPv6 address")?;
            let port = after.strip_prefix(':').ok_or("expected [address]:port")?;
            if !is_ipv6(host) {
                return Err("brackets must hold an IPv6 address");
            }
            (host, port)
        }
        None => {
            let (host, port) = address.rsplit_once(':').ok_or("expected host:port")?;
            if host.contains(':') && !is_ipv6(host) {
                return Err("invalid IPv6 address (write it as [address]:port)");
            }
            (host, port)
        }
    };
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '%'))
    {
        return Err("invalid host name");
    }
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err("port must be a number from 0 to 65535");
    }
    let port = port
        .parse::<u16>()
        .map_err(|_| "port must be a number from 0 to 65535")?;
    Ok((host.to_string(), port))
}

fn is_ipv6(host: &str) -> bool {
    // A zone id (`fe80::1%eth0`) is legal in a bind address but not in `Ipv6Addr`.
    let addr = host.split_once('%').map_or(host, |(addr, _)| addr);
    addr.parse::<Ipv6Addr>().is_ok()
}

/// A host and port to connect to: unlike a bind address, both must be given.
fn parse_peer(address: &str) -> Result<(String, u16), &'static str> {
    let (host, port) = parse_host_port(address)?;
    if host.is_empty() {
        return Err("host must not be empty");
    }
    if port == 0 {
        return Err("port must be from 1 to 65535");
    }
    Ok((host, port))
}

pub(super) fn parse_voters(value: &str) -> Result<Vec<Voter>, ConfigError> {
    let key = "controller.quorum.voters";
    let mut voters: Vec<Voter> = Vec::new();
    for item in parse_list(value) {
        let bad = |reason: &str| invalid(key, value, format!("'{item}': {reason}"));
        let (id, address) = item
            .split_once('@')
            .ok_or_else(|| bad("expected id@host:port"))?;
        let id = id
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|&id| id >= 0)
            .ok_or_else(|| bad("id must be an integer >= 0"))?;
        let (host, port) = parse_peer(address.trim()).map_err(bad)?;
        if voters.iter().any(|v| v.id == id) {
            return Err(invalid(
                key,
                value,
                format!("voter id {id} is listed twice"),
            ));
        }
        voters.push(Voter { id, host, port });
    }
    Ok(voters)
}

pub(super) fn parse_bootstrap_servers(value: &str) -> Result<Vec<Voter>, ConfigError> {
    let key = "controller.quorum.bootstrap.servers";
    parse_list(value)
        .into_iter()
        .map(|item| {
            let (host, port) =
                parse_peer(item).map_err(|r| invalid(key, value, format!("'{item}': {r}")))?;
            Ok(Voter { id: -1, host, port })
        })
        .collect()
}

/// Listener name to security protocol, both upper-cased.
fn parse_protocol_map(value: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let key = "listener.security.protocol.map";
    let mut map = BTreeMap::new();
    for item in parse_list(value) {
        let (name, protocol) = item.split_once(':').ok_or_else(|| {
            invalid(
                key,
                value,
                format!("'{item}': expected LISTENER_NAME:PROTOCOL"),
            )
        })?;
        let name = name.trim().to_ascii_uppercase();
        let protocol = protocol.trim().to_ascii_uppercase();
        if name.is_empty() {
            return Err(invalid(
                key,
                value,
                format!("'{item}': listener name is empty"),
            ));
        }
        if !SECURITY_PROTOCOLS.contains(&protocol.as_str()) {
            return Err(invalid(
                key,
                value,
                format!("'{item}': unknown security protocol '{protocol}'"),
            ));
        }
        if map.insert(name.clone(), protocol).is_some() {
            return Err(invalid(
                key,
                value,
                format!("listener '{name}' is mapped twice"),
            ));
        }
    }
    Ok(map)
}
