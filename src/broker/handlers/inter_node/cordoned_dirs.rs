//! KIP-1066's BrokerHeartbeat field `CordonedLogDirs` (tagged, tag 1, a compact array of
//! directory ids), which the vendored codec does not know: carried as a raw tagged field.
//! Layout as Kafka's: an unsigned varint of the count plus one (0: null), then 16 bytes each.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

/// Kafka's tag for `CordonedLogDirs` (OfflineLogDirs is tag 0).
pub(crate) const CORDONED_LOG_DIRS_TAG: i32 = 1;

pub(crate) fn encode(dirs: &[Uuid]) -> Bytes {
    let mut buf = BytesMut::with_capacity(5 + dirs.len() * 16);
    let mut n = dirs.len() as u64 + 1;
    while n >= 0x80 {
        buf.put_u8((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    buf.put_u8(n as u8);
    for d in dirs {
        buf.put_slice(d.as_bytes());
    }
    buf.freeze()
}

/// The directory ids; `None` for a null array or a field that does not parse.
pub(crate) fn decode(mut field: &[u8]) -> Option<Vec<Uuid>> {
    let mut n: u64 = 0;
    let mut shift = 0;
    loop {
        if !field.has_remaining() || shift > 28 {
            return None;
        }
        let b = field.get_u8();
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let count = usize::try_from(n.checked_sub(1)?).ok()?;
    if field.remaining() != count.checked_mul(16)? {
        return None;
    }
    Some(
        (0..count)
            .map(|_| Uuid::from_u128(field.get_u128()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_does_not_parse() {
        for dirs in [
            vec![],
            vec![Uuid::from_u128(7)],
            (0..200).map(Uuid::from_u128).collect(),
        ] {
            assert_eq!(decode(&encode(&dirs)), Some(dirs));
        }
        assert_eq!(decode(&[0]), None, "null");
        assert_eq!(decode(&[]), None);
        assert_eq!(
            decode(&[2, 1, 2, 3]),
            None,
            "one id promised, 3 bytes given"
        );
        assert_eq!(decode(&[0x80]), None, "varint cut short");
    }
}
