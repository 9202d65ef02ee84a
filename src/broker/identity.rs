//! Which cluster a data directory belongs to: Kafka's `meta.properties` (`version=1`,
//! `cluster.id`, `node.id`, `directory.id`), written by `weir format` (Kafka's
//! `kafka-storage.sh format`) or, for a node that is its own quorum of one, at first start.
//! A directory of another cluster or another node is refused, naming both ids.

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use uuid::Uuid;

use crate::io::{create_dir_all_durable, read_file, write_file_atomic, Io};

pub const META_PROPERTIES: &str = "meta.properties";

/// What `meta.properties` holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirIdentity {
    pub cluster_id: String,
    pub node_id: i32,
    pub directory_id: String,
}

/// Writes `meta.properties` into `dir` (created if missing) for `cluster_id` and `node_id`.
/// Formatting a directory already formatted for the same ids keeps it as it is; one formatted
/// for other ids is refused (Kafka's `format` without `--ignore-formatted` refuses too).
pub async fn format_log_dir(
    io: &Io,
    dir: &Path,
    cluster_id: &str,
    node_id: i32,
) -> anyhow::Result<DirIdentity> {
    validate_cluster_id(cluster_id)?;
    create_dir_all_durable(io.disk.as_ref(), dir).await?;
    if let Some(existing) = read_identity(io, dir)? {
        check_identity(dir, &existing, Some(cluster_id), node_id)?;
        return Ok(existing);
    }
    let identity = DirIdentity {
        cluster_id: cluster_id.to_string(),
        node_id,
        directory_id: random_id(io),
    };
    write_identity(io, dir, &identity).await?;
    Ok(identity)
}

async fn write_identity(io: &Io, dir: &Path, identity: &DirIdentity) -> anyhow::Result<()> {
    let text = format!(
        "#\n#Written by weir format\nversion=1\ncluster.id={}\nnode.id={}\ndirectory.id={}\n",
        identity.cluster_id, identity.node_id, identity.directory_id
    );
    write_file_atomic(
        io.disk.as_ref(),
        &dir.join(META_PROPERTIES),
        text.as_bytes(),
    )
    .await?;
    Ok(())
}

/// The directory's `directory.id` as a UUID (KIP-858). A directory formatted before it had
/// one (or with one that does not decode) is given a fresh id now, written back.
pub async fn directory_uuid(io: &Io, dir: &Path, identity: &DirIdentity) -> anyhow::Result<Uuid> {
    if let Some(id) = decode_id(&identity.directory_id) {
        return Ok(id);
    }
    let fresh = DirIdentity {
        directory_id: random_id(io),
        ..identity.clone()
    };
    write_identity(io, dir, &fresh).await?;
    decode_id(&fresh.directory_id).ok_or_else(|| anyhow::anyhow!("a fresh directory id decodes"))
}

/// A Kafka UUID string (22 characters of URL-safe base64) as a UUID.
pub fn decode_id(text: &str) -> Option<Uuid> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    Uuid::from_slice(&bytes).ok()
}

/// A UUID as Kafka prints it.
pub fn encode_id(id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// Reads `meta.properties`, if the directory has one.
pub fn read_identity(io: &Io, dir: &Path) -> anyhow::Result<Option<DirIdentity>> {
    let path = dir.join(META_PROPERTIES);
    let Ok(raw) = read_file(io.disk.as_ref(), &path) else {
        return Ok(None);
    };
    let props = crate::config::parse_properties(&String::from_utf8_lossy(&raw))?;
    let cluster_id = props
        .get("cluster.id")
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("{}: no cluster.id", path.display()))?;
    let node_id = props
        .get("node.id")
        .ok_or_else(|| anyhow::anyhow!("{}: no node.id", path.display()))?
        .parse::<i32>()
        .map_err(|e| anyhow::anyhow!("{}: node.id: {e}", path.display()))?;
    if let Some(v) = props.get("version") {
        if v != "1" {
            anyhow::bail!(
                "{}: version={v} is not supported (only 1, KRaft's)",
                path.display()
            );
        }
    }
    Ok(Some(DirIdentity {
        cluster_id,
        node_id,
        directory_id: props.get("directory.id").cloned().unwrap_or_default(),
    }))
}

/// Refuses a directory that belongs to another node or (when `cluster_id` is known) another
/// cluster.
pub fn check_identity(
    dir: &Path,
    found: &DirIdentity,
    cluster_id: Option<&str>,
    node_id: i32,
) -> anyhow::Result<()> {
    if found.node_id != node_id {
        anyhow::bail!(
            "{} belongs to node.id={}, but this node is node.id={node_id}",
            dir.join(META_PROPERTIES).display(),
            found.node_id
        );
    }
    if let Some(expected) = cluster_id {
        if found.cluster_id != expected {
            anyhow::bail!(
                "{} belongs to cluster.id={}, not cluster.id={expected}",
                dir.join(META_PROPERTIES).display(),
                found.cluster_id
            );
        }
    }
    Ok(())
}

/// Opens the directory's identity at start. `auto_format` (a node that is its own quorum)
/// formats an unformatted directory with a fresh cluster id; otherwise an unformatted directory
/// is refused, as Kafka refuses to start without `kafka-storage.sh format`.
pub async fn load_identity(
    io: &Io,
    dir: &Path,
    node_id: i32,
    auto_format: bool,
) -> anyhow::Result<DirIdentity> {
    if let Some(found) = read_identity(io, dir)? {
        check_identity(dir, &found, None, node_id)?;
        return Ok(found);
    }
    if !auto_format {
        anyhow::bail!(
            "{} is not formatted (no {META_PROPERTIES}) and controller.quorum.voters names other \
             nodes: run `weir format --config <server.properties> --cluster-id <ID>` on every \
             node with the same id first (`weir format --random-cluster-id` makes one)",
            dir.display()
        );
    }
    format_log_dir(io, dir, &random_cluster_id(io), node_id).await
}

/// The directories of `log.dirs` as opened at start.
pub struct OpenedDirs {
    pub cluster_id: String,
    /// The healthy ones with their directory ids, in `log.dirs` order; the first is always
    /// there (it holds the metadata log).
    pub online: Vec<(std::path::PathBuf, Uuid)>,
    /// Those that could not be opened (unreadable, corrupt, unwritable), with why.
    pub failed: Vec<(std::path::PathBuf, String)>,
}

/// Opens every directory of `log.dirs` at start ([`load_identity`] each): one cluster id for
/// all, and each directory's id, distinct. With `auto_format`, unformatted directories after
/// the first are formatted for the first one's cluster.
///
/// A directory after the first that cannot be opened (an I/O error, an unreadable or corrupt
/// `meta.properties`, one that is not formatted) does not stop the broker: it is `failed`,
/// left out of the registration, as Kafka's `LogManager` starts with it offline. The first
/// (the metadata log's) failing stops it, and so does a directory of another node or cluster,
/// or two directories with one id (misconfigurations, not failures).
pub async fn load_log_dirs(
    io: &Io,
    dirs: &[std::path::PathBuf],
    node_id: i32,
    auto_format: bool,
) -> anyhow::Result<OpenedDirs> {
    let (first, rest) = dirs
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("log.dirs names no directory"))?;
    create_dir_all_durable(io.disk.as_ref(), first).await?;
    let identity = load_identity(io, first, node_id, auto_format).await?;
    let mut opened = vec![(first.clone(), directory_uuid(io, first, &identity).await?)];
    let mut failed = Vec::new();
    for dir in rest {
        let found = async {
            create_dir_all_durable(io.disk.as_ref(), dir).await?;
            let found = match read_identity(io, dir)? {
                Some(found) => found,
                None if auto_format => {
                    format_log_dir(io, dir, &identity.cluster_id, node_id).await?
                }
                None => load_identity(io, dir, node_id, false).await?,
            };
            let id = directory_uuid(io, dir, &found).await?;
            anyhow::Ok((found, id))
        }
        .await;
        let (found, id) = match found {
            Ok(found) => found,
            Err(e) => {
                tracing::error!(dir = %dir.display(), error = %e,
                    "log directory failed at start: offline, the others serve");
                failed.push((dir.clone(), e.to_string()));
                continue;
            }
        };
        check_identity(dir, &found, Some(&identity.cluster_id), node_id)?;
        if let Some((other, _)) = opened.iter().find(|(_, o)| *o == id) {
            anyhow::bail!(
                "{} and {} have the same directory.id {} (a copied disk?): give one a new id",
                other.display(),
                dir.display(),
                encode_id(id)
            );
        }
        opened.push((dir.clone(), id));
    }
    Ok(OpenedDirs {
        cluster_id: identity.cluster_id,
        online: opened,
        failed,
    })
}

/// A fresh cluster id in Kafka's form: a random UUID in URL-safe base64 without padding.
pub fn random_cluster_id(io: &Io) -> String {
    random_id(io)
}

fn random_id(io: &Io) -> String {
    let uuid = Uuid::from_u64_pair(io.rng.next_u64(), io.rng.next_u64());
    // URL-safe base64 without padding: how Kafka prints cluster ids.
    URL_SAFE_NO_PAD.encode(uuid.as_bytes())
}

/// Kafka's `Uuid.fromString`: 22 characters of URL-safe base64 (16 bytes).
pub fn validate_cluster_id(id: &str) -> anyhow::Result<()> {
    let alphabet_ok = id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if id.len() != 22 || !alphabet_ok {
        anyhow::bail!(
            "cluster id '{id}' is not a Kafka cluster id (22 characters of URL-safe base64, \
             as `weir format --random-cluster-id` or `kafka-storage.sh random-uuid` print)"
        );
    }
    Ok(())
}

#[cfg(all(test, not(madsim)))]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;
    use crate::io::memdisk::{block_on, MemDisk};

    fn io() -> Io {
        let mut io = Io::os();
        io.disk = Arc::new(MemDisk::new(1));
        io
    }

    #[test]
    fn format_then_load_and_refusals() {
        let io = io();
        let dir = Path::new("/d");
        let id = random_cluster_id(&io);
        assert_eq!(id.len(), 22);
        let written = block_on(format_log_dir(&io, dir, &id, 3)).unwrap();
        assert_eq!(written.cluster_id, id);
        let loaded = block_on(load_identity(&io, dir, 3, false)).unwrap();
        assert_eq!(loaded, written);
        // Formatting again with the same ids keeps the directory id.
        assert_eq!(block_on(format_log_dir(&io, dir, &id, 3)).unwrap(), written);
        let other = random_cluster_id(&io);
        let e = block_on(format_log_dir(&io, dir, &other, 3)).unwrap_err();
        assert!(e.to_string().contains(&format!("cluster.id={id}")), "{e}");
        assert!(
            e.to_string().contains(&format!("cluster.id={other}")),
            "{e}"
        );
        let e = block_on(load_identity(&io, dir, 4, false)).unwrap_err();
        assert!(e.to_string().contains("node.id=3") && e.to_string().contains("node.id=4"));
    }

    #[test]
    fn unformatted_dirs_are_refused_unless_auto_formatted() {
        let io = io();
        let e = block_on(load_identity(&io, Path::new("/u"), 1, false)).unwrap_err();
        assert!(e.to_string().contains("weir format"), "{e}");
        let made = block_on(load_identity(&io, Path::new("/u"), 1, true)).unwrap();
        assert_eq!(made.node_id, 1);
        assert!(validate_cluster_id(&made.cluster_id).is_ok());
    }

    #[test]
    fn cluster_ids_are_checked() {
        assert!(validate_cluster_id("MkU3OEVBNTcwNTJENDM2Qk").is_ok());
        for bad in [
            "",
            "short",
            "MkU3OEVBNTcwNTJENDM2Qk=",
            "MkU3OEVBNTcwNTJENDM2Q!",
        ] {
            assert!(validate_cluster_id(bad).is_err(), "{bad}");
        }
    }

    /// A directory after the first that cannot be opened is offline and the broker starts;
    /// the first (the metadata log's) failing, or a directory of another cluster, stops it.
    #[test]
    fn a_directory_failing_at_start_goes_offline_unless_it_is_the_first() {
        let io = io();
        let dirs: Vec<PathBuf> = ["/a", "/b", "/c"].iter().map(PathBuf::from).collect();
        let id = random_cluster_id(&io);
        for d in &dirs {
            block_on(format_log_dir(&io, d, &id, 1)).unwrap();
        }
        let corrupt = |d: &str| {
            block_on(write_file_atomic(
                io.disk.as_ref(),
                &Path::new(d).join(META_PROPERTIES),
                b"version=7\ncluster.id=x\n",
            ))
            .unwrap()
        };
        corrupt("/b");
        let opened = block_on(load_log_dirs(&io, &dirs, 1, false)).unwrap();
        let online: Vec<&PathBuf> = opened.online.iter().map(|(p, _)| p).collect();
        assert_eq!(online, [&dirs[0], &dirs[2]]);
        assert_eq!(opened.failed.len(), 1);
        assert_eq!(opened.failed[0].0, dirs[1]);
        // Unformatted (and not auto-formatted) counts as failed too.
        let with_new: Vec<PathBuf> = ["/a", "/new"].iter().map(PathBuf::from).collect();
        let opened = block_on(load_log_dirs(&io, &with_new, 1, false)).unwrap();
        assert_eq!(opened.failed.len(), 1);
        // Another cluster's directory is a misconfiguration: refused.
        block_on(format_log_dir(
            &io,
            Path::new("/other"),
            &random_cluster_id(&io),
            1,
        ))
        .unwrap();
        let mixed: Vec<PathBuf> = ["/a", "/other"].iter().map(PathBuf::from).collect();
        assert!(block_on(load_log_dirs(&io, &mixed, 1, false)).is_err());
        // The first failing stops the broker.
        corrupt("/a");
        assert!(block_on(load_log_dirs(&io, &dirs, 1, false)).is_err());
    }
}
