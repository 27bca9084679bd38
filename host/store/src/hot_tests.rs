//! The hot-prefix record codec: round trips, and refuses damage, truncation, oversized counts
//! and out-of-range fields without panicking.

use super::*;

fn record() -> HotRecord {
    HotRecord {
        model: ModelFingerprint([9; 32]),
        elem: KvElem::F16,
        block_tokens: 4,
        entries: vec![
            HotEntry {
                namespace: "alpha".into(),
                tokens: (0..12).collect(),
                count: 7.25,
            },
            HotEntry {
                namespace: "β".into(),
                tokens: (100..104).collect(),
                count: 1.0,
            },
        ],
    }
}

/// Re-seals `b` with a fresh checksum (to reach the field checks behind it).
fn reseal(mut b: Vec<u8>) -> Vec<u8> {
    let body = b.len() - 32;
    let sum = *blake3::hash(&b[..body]).as_bytes();
    b[body..].copy_from_slice(&sum);
    b
}

#[test]
fn round_trips() {
    let r = record();
    assert_eq!(HotRecord::decode(&r.encode().unwrap()), Ok(r));
    let empty = HotRecord {
        entries: vec![],
        ..record()
    };
    assert_eq!(HotRecord::decode(&empty.encode().unwrap()), Ok(empty));
}

#[test]
fn every_flipped_byte_and_every_truncation_is_refused() {
    let b = record().encode().unwrap();
    for i in 0..b.len() {
        let mut bad = b.clone();
        bad[i] ^= 0x10;
        assert!(HotRecord::decode(&bad).is_err(), "flip at {i}");
    }
    for n in 0..b.len() {
        assert!(HotRecord::decode(&b[..n]).is_err(), "truncated to {n}");
    }
    let mut long = b.clone();
    long.push(0);
    assert!(HotRecord::decode(&long).is_err());
}

#[test]
fn counts_past_the_caps_are_refused_before_allocating() {
    let b = record().encode().unwrap();
    let mut bad = b.clone();
    bad[48..52].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        HotRecord::decode(&reseal(bad)),
        Err(HotError::Field("entry count"))
    );
    // The first entry's token count (after its 2-byte length, 5-byte name and count).
    let at = FIXED + 2 + 5 + 8;
    let mut bad = b.clone();
    bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        HotRecord::decode(&reseal(bad)),
        Err(HotError::Field("token count"))
    );
    let mut bad = b.clone();
    bad[at..at + 4].copy_from_slice(&13u32.to_le_bytes());
    assert!(
        HotRecord::decode(&reseal(bad)).is_err(),
        "runs past the end"
    );
    let mut bad = b;
    bad[FIXED..FIXED + 2].copy_from_slice(&u16::MAX.to_le_bytes());
    assert_eq!(
        HotRecord::decode(&reseal(bad)),
        Err(HotError::Field("namespace name"))
    );
    assert_eq!(
        HotRecord::decode(&vec![0; MAX_HOT_BYTES + 1]),
        Err(HotError::Length(MAX_HOT_BYTES + 1))
    );
}

#[test]
fn bad_fields_are_refused_on_both_sides() {
    let mut r = record();
    r.entries[0].count = f64::NAN;
    assert_eq!(r.encode(), Err(HotError::Field("count")));
    let mut r = record();
    r.entries[0].tokens.pop();
    assert_eq!(r.encode(), Err(HotError::Field("token count")));
    let mut r = record();
    r.entries[1].namespace.clear();
    assert_eq!(r.encode(), Err(HotError::Field("namespace name")));
    let mut r = record();
    r.entries = vec![r.entries[1].clone(); MAX_HOT_ENTRIES + 1];
    assert_eq!(r.encode(), Err(HotError::Field("entry count")));

    // A negative count or a partial block, sealed with a valid checksum, is still refused.
    let b = record().encode().unwrap();
    let at = FIXED + 2 + 5;
    let mut bad = b.clone();
    bad[at..at + 8].copy_from_slice(&(-1.0f64).to_bits().to_le_bytes());
    assert_eq!(
        HotRecord::decode(&reseal(bad)),
        Err(HotError::Field("count"))
    );
    let mut bad = b.clone();
    bad[12..16].copy_from_slice(&5u32.to_le_bytes());
    assert_eq!(
        HotRecord::decode(&reseal(bad)),
        Err(HotError::Field("token count"))
    );
    let mut bad = b;
    bad[FIXED + 2] = 0xff;
    assert_eq!(
        HotRecord::decode(&reseal(bad)),
        Err(HotError::Field("namespace name"))
    );
}
