//! The producer-state snapshot: the state as of a log offset, written at checkpoints and on
//! clean shutdown, so that a start (or a truncation) replays only the batches after it instead
//! of the whole log.
//!
//! A snapshot names the batch it ends after (base offset, CRC, leader epoch). One that does not
//! match the log is from another history (written just before a truncation it then outlived,
//! say) and is ignored, never trusted: state built from it would dedupe against batches the log
//! no longer has.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::super::producer::ProducerStates;
use super::state::Replayed;
use crate::io::Disk;
use crate::log::batch::BatchHeader;
use crate::log::control;
use crate::log::Log;

/// The snapshot file in the partition directory.
pub(super) const PRODUCER_SNAPSHOT: &str = "producer-state";

/// The batch a snapshot ends after.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct LastBatch {
    pub base_offset: i64,
    pub crc: u32,
    pub leader_epoch: i32,
}

impl LastBatch {
    pub fn of(header: &BatchHeader) -> LastBatch {
        LastBatch {
            base_offset: header.base_offset,
            crc: header.crc,
            leader_epoch: header.partition_leader_epoch,
        }
    }

    /// The last batch below `end` in `log`, if there is one.
    pub fn in_log(log: &Log, end: i64) -> io::Result<Option<LastBatch>> {
        if end <= log.start_offset() {
            return Ok(None);
        }
        Ok(log
            .batch_at(end - 1)?
            .filter(|h| h.next_offset() == end)
            .map(|h| LastBatch::of(&h)))
    }
}

#[derive(Serialize, Deserialize)]
pub(super) struct Snapshot {
    /// The state covers every batch below this offset.
    pub offset: i64,
    pub producers: ProducerStates,
    /// Absent in snapshots written before it was recorded (then trusted as before).
    #[serde(default)]
    pub last_batch: Option<LastBatch>,
}

impl Snapshot {
    /// `crc32c-hex\njson`.
    pub fn render(&self) -> Vec<u8> {
        let body = serde_json::to_vec(self).expect("producer state serializes");
        let mut raw = format!("{:08x}\n", crc32c::crc32c(&body)).into_bytes();
        raw.extend_from_slice(&body);
        raw
    }

    /// A damaged snapshot is ignored, never trusted.
    pub fn load(disk: &dyn Disk, dir: &Path) -> Option<Snapshot> {
        let raw = crate::io::read_file(disk, &dir.join(PRODUCER_SNAPSHOT)).ok()?;
        let split = raw.iter().position(|&b| b == b'\n')?;
        let crc = u32::from_str_radix(std::str::from_utf8(&raw[..split]).ok()?, 16).ok()?;
        let body = &raw[split + 1..];
        if crc32c::crc32c(body) != crc {
            return None;
        }
        let mut snapshot: Snapshot = serde_json::from_slice(body).ok()?;
        snapshot.producers.reindex();
        Some(snapshot)
    }

    /// Whether this snapshot describes a prefix of `log` no longer than `up_to`.
    pub fn fits(&self, log: &Log, up_to: i64) -> io::Result<bool> {
        if self.offset < log.start_offset() || self.offset > up_to.min(log.end_offset()) {
            return Ok(false);
        }
        if self.offset == log.start_offset() {
            // Nothing in the log below it to compare with (retention took it); a truncation
            // never cuts below the log start, so this prefix is common to every history.
            return Ok(true);
        }
        match self.last_batch {
            None => Ok(true),
            Some(want) => Ok(LastBatch::in_log(log, self.offset)? == Some(want)),
        }
    }
}

/// The producer state of the whole log at open: from the snapshot file in `dir` when it fits.
pub(super) fn rebuild_at_open(
    log: &Log,
    disk: &dyn Disk,
    dir: &Path,
) -> io::Result<ProducerStates> {
    #[allow(unused_mut)]
    let mut snapshot = Snapshot::load(disk, dir);
    #[cfg(any(madsim, test))]
    if (log.config().planted).is(crate::config::PlantedBug::SnapshotBeyondLog) {
        // The planted bug takes a snapshot past the log end as if it ended there.
        if let Some(s) = snapshot.as_mut().filter(|s| s.offset > log.end_offset()) {
            s.offset = log.end_offset();
            s.last_batch = None;
        }
    }
    rebuild(log, snapshot, log.end_offset())
}

/// The producer state of the log prefix below `up_to`, from `snapshot` when it fits, else from
/// the log start. The log keeps no append times: a batch's own max timestamp stands in (as in
/// Kafka).
pub(super) fn rebuild(
    log: &Log,
    snapshot: Option<Snapshot>,
    up_to: i64,
) -> io::Result<ProducerStates> {
    let (mut producers, from) = match snapshot {
        Some(s) if s.fits(log, up_to)? => (s.producers, s.offset),
        _ => (ProducerStates::default(), log.start_offset()),
    };
    #[cfg(any(madsim, test))]
    producers.set_planted(log.config().planted);
    let mut failed = None;
    log.scan_headers(from, |header| {
        if header.base_offset >= up_to || failed.is_some() {
            return;
        }
        if header.is_control() && header.is_idempotent() {
            // Only a marker's record says commit or abort: read its (small) batch.
            match log.read(header.base_offset, header.total_len(), log.end_offset()) {
                Ok(bytes) => {
                    let at_log_start = log.start_offset();
                    replay(
                        &mut producers,
                        &bytes,
                        header,
                        header.max_timestamp,
                        at_log_start,
                    );
                }
                Err(e) => failed = Some(e),
            }
        } else {
            let went_back = producers.record_replicated(header, header.max_timestamp);
            warn_if_epoch_went_back(header, went_back);
        }
    })?;
    if let Some(e) = failed {
        return Err(io::Error::other(format!(
            "reading a transaction marker to rebuild producer state: {e:?}"
        )));
    }
    Ok(producers)
}

/// Applies one batch from the log or the leader (`bytes` holds it whole) to the producer state,
/// unchecked: data through [`ProducerStates::record_replicated`], a transaction marker through
/// [`ProducerStates::record_marker`]. A marker whose record cannot be read is logged and
/// skipped (the leader wrote it; its transaction then stays open here, holding the LSO, which
/// is the safe side).
pub(super) fn replay(
    producers: &mut ProducerStates,
    bytes: &[u8],
    header: &BatchHeader,
    now_ms: i64,
    high_watermark: i64,
) {
    let what = classify(bytes, header);
    let went_back = super::state::replay(producers, header, what, now_ms, high_watermark);
    warn_if_epoch_went_back(header, went_back);
}

/// What a batch means to the producer state: data, a readable marker, or nothing. An
/// unreadable marker is logged here (the core does not log).
pub(super) fn classify(bytes: &[u8], header: &BatchHeader) -> Replayed {
    if !header.is_control() {
        return Replayed::Data;
    }
    if !header.is_idempotent() {
        return Replayed::Nothing;
    }
    match control::parse_marker(bytes, header) {
        Ok(Some(marker)) => Replayed::Marker(marker),
        Ok(None) => Replayed::Nothing,
        Err(e) => {
            tracing::error!(offset = header.base_offset, error = %e,
                "unreadable transaction marker");
            Replayed::Nothing
        }
    }
}

/// Kafka's warning when a replicated (or replayed) batch carries an older producer epoch than
/// the producer's: a zombie's batch the leader accepted before it was fenced.
pub(super) fn warn_if_epoch_went_back(header: &BatchHeader, went_back: Option<i16>) {
    if let Some(current) = went_back {
        tracing::warn!(
            producer_id = header.producer_id,
            epoch = header.producer_epoch,
            current,
            offset = header.base_offset,
            "replicated batch with an older producer epoch"
        );
    }
}
