//! Tests of whole passes on MemDisk (see the proptest).
