//! Codec round trips, every verification failure, malformed headers and huge lengths.

use super::*;

fn layout(elem: KvElem) -> KvLayout {
    KvLayout::new(2, 64, elem).with_block_tokens(4)
}

fn identity(elem: KvElem) -> BlockIdentity {
    BlockIdentity {
        model: ModelFingerprint([1; 32]),
        layout: layout(elem),
        salt: NamespaceSalt::derive("a"),
        hash: BlockHash([7; 32]),
    }
}

fn f16_block(n_bytes: usize) -> Vec<u8> {
    (0..n_bytes / 2)
        .flat_map(|i| half::f16::from_f32(((i % 97) as f32 - 48.0) / 16.0).to_le_bytes())
        .collect()
}

fn expect(id: &BlockIdentity) -> Expect<'static> {
    Expect {
        model: id.model,
        layout: id.layout,
        hash: id.hash,
        root: None,
        salt: None,
        tokens: None,
    }
}

#[test]
fn lossless_round_trip_is_exact_for_every_element_type() {
    for elem in [KvElem::F32, KvElem::F16, KvElem::Q8_0, KvElem::Q4_0] {
        let id = identity(elem);
        let n = id.layout.block_bytes().unwrap();
        let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        for enc in [Encoding::Raw, Encoding::Lz4] {
            let bytes = encode(&id, &[1, 2, 3, 4], &data, enc).unwrap();
            let mut out = vec![0; n];
            let got = decode_into(&bytes, &expect(&id), &mut out).unwrap();
            assert!(!got.is_lossy());
            assert_eq!(out, data, "{elem:?} {enc:?}");
            let h = parse_header(&bytes).unwrap();
            assert_eq!(h.tokens().collect::<Vec<_>>(), vec![1, 2, 3, 4]);
            assert_eq!(h.identity, id);
        }
    }
}

#[test]
fn compressible_blocks_shrink_and_incompressible_fall_back_to_raw() {
    let id = identity(KvElem::F16);
    let n = id.layout.block_bytes().unwrap();
    let zeros = encode(&id, &[0; 4], &vec![0; n], Encoding::Lz4).unwrap();
    assert!(zeros.len() < n / 4);
    assert_eq!(parse_header(&zeros).unwrap().encoding, Encoding::Lz4);
    let raw = encode(&id, &[0; 4], &noise(n, 0x1234_5678), Encoding::Lz4).unwrap();
    assert_eq!(parse_header(&raw).unwrap().encoding, Encoding::Raw);
}

#[test]
fn a_large_block_whose_leading_bytes_do_not_compress_is_stored_raw_unprobed() {
    // 32 KiB per layer and K/V: a 256 KiB block, so the 64 KiB probe applies.
    let id = BlockIdentity {
        layout: KvLayout::new(4, 1024, KvElem::F16).with_block_tokens(16),
        ..identity(KvElem::F16)
    };
    let n = id.layout.block_bytes().unwrap();
    assert!(n > 2 * LZ4_PROBE, "{n}");
    let mut out = vec![0; n];
    // Noise in the probe, zeros after it: raw (the probe decides), and exact.
    let mut data = vec![0; n];
    data[..LZ4_PROBE].copy_from_slice(&noise(LZ4_PROBE, 11));
    let bytes = encode(&id, &[0; 16], &data, Encoding::Lz4).unwrap();
    assert_eq!(parse_header(&bytes).unwrap().encoding, Encoding::Raw);
    assert_eq!(
        decode_into(&bytes, &expect(&id), &mut out),
        Ok(Encoding::Raw)
    );
    assert_eq!(out, data);
    // A compressible probe: the whole block is compressed and kept if it saves enough.
    let zeros = vec![0; n];
    let bytes = encode(&id, &[0; 16], &zeros, Encoding::Lz4).unwrap();
    assert_eq!(parse_header(&bytes).unwrap().encoding, Encoding::Lz4);
    assert!(bytes.len() < n / 16);
    // 8 KiB of zeros: 1/8 of the probe (it passes), 1/32 of the block (not worth it).
    let mut tail_noise = noise(n, 5);
    tail_noise[..LZ4_PROBE / 8].fill(0);
    let bytes = encode(&id, &[0; 16], &tail_noise, Encoding::Lz4).unwrap();
    assert_eq!(
        parse_header(&bytes).unwrap().encoding,
        Encoding::Raw,
        "the probe passed, the whole block did not save 1/16"
    );
    assert_eq!(
        decode_into(&bytes, &expect(&id), &mut out),
        Ok(Encoding::Raw)
    );
    assert_eq!(out, tail_noise);
}

fn noise(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

#[test]
fn lz4_is_kept_only_when_it_saves_a_sixteenth() {
    let id = identity(KvElem::F16);
    let n = id.layout.block_bytes().unwrap();
    // A run of zeros over 1/32 of the block saves about 3%: raw. Over 1/4 of it: LZ4.
    for (zeros, want) in [(n / 32, Encoding::Raw), (n / 4, Encoding::Lz4)] {
        let mut data = noise(n, 7);
        data[..zeros].fill(0);
        let bytes = encode(&id, &[0; 4], &data, Encoding::Lz4).unwrap();
        assert_eq!(
            parse_header(&bytes).unwrap().encoding,
            want,
            "{zeros} zeros"
        );
        let mut out = vec![0; n];
        assert_eq!(decode_into(&bytes, &expect(&id), &mut out), Ok(want));
        assert_eq!(out, data);
    }
}

#[test]
fn check_verifies_without_decoding_and_a_raw_payload_is_the_block_in_place() {
    let id = identity(KvElem::F16);
    let n = id.layout.block_bytes().unwrap();
    let data = noise(n, 3);
    let root = BlockHash::root(&id.model, KvElem::F16, 4, &id.salt);
    let bytes = encode_shared(&id, &root, &[1, 2, 3, 4], &data, Encoding::Lz4).unwrap();
    let own = Expect {
        root: Some(root),
        tokens: Some(&[1, 2, 3, 4]),
        ..expect(&id)
    };
    let h = check(&bytes, &own, n).unwrap();
    assert_eq!(h.encoding, Encoding::Raw);
    assert_eq!(&bytes[h.payload_offset(&bytes)..], &data[..]);
    let mut out = vec![0; n];
    h.decode(&mut out).unwrap();
    assert_eq!(out, data);
    // What decode_into refuses, check refuses: a wrong length, a foreign root, a flipped byte.
    assert!(matches!(
        check(&bytes, &own, n - 2),
        Err(CodecError::LengthMismatch { .. })
    ));
    let foreign = Expect {
        root: Some(BlockHash::root(
            &id.model,
            KvElem::F16,
            4,
            &NamespaceSalt([9; 32]),
        )),
        ..own
    };
    assert_eq!(
        check(&bytes, &foreign, n).map(|h| h.encoding),
        Err(CodecError::Foreign("namespace salt"))
    );
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert_eq!(
        check(&flipped, &own, n).map(|h| h.encoding),
        Err(CodecError::Checksum)
    );
}

#[test]
fn lossy_modes_are_close_labelled_and_only_for_f16() {
    let id = identity(KvElem::F16);
    let n = id.layout.block_bytes().unwrap();
    let data = f16_block(n);
    for (enc, tol) in [(Encoding::Q8_0, 0.05f32), (Encoding::Q4_0, 0.5)] {
        let bytes = encode(&id, &[0; 4], &data, enc).unwrap();
        assert!(bytes.len() < HEADER_BYTES + 16 + n, "{enc:?} shrinks");
        let mut out = vec![0; n];
        assert_eq!(decode_into(&bytes, &expect(&id), &mut out), Ok(enc));
        for (a, b) in data.as_chunks::<2>().0.iter().zip(out.as_chunks::<2>().0) {
            let a = half::f16::from_le_bytes(*a).to_f32();
            let b = half::f16::from_le_bytes(*b).to_f32();
            assert!((a - b).abs() <= tol, "{enc:?}: {a} vs {b}");
        }
    }
    let id32 = identity(KvElem::F32);
    let n32 = id32.layout.block_bytes().unwrap();
    let bytes = encode(&id32, &[0; 4], &vec![0; n32], Encoding::Q4_0).unwrap();
    assert_eq!(parse_header(&bytes).unwrap().encoding, Encoding::Lz4);
}

#[test]
fn every_flipped_byte_is_rejected() {
    let id = identity(KvElem::F16);
    let n = id.layout.block_bytes().unwrap();
    let bytes = encode(&id, &[9, 8, 7, 6], &f16_block(n), Encoding::Raw).unwrap();
    let mut out = vec![0; n];
    for i in (0..bytes.len()).step_by(13).chain([bytes.len() - 1]) {
        let mut bad = bytes.clone();
        bad[i] ^= 0x10;
        assert!(
            decode_into(&bad, &expect(&id), &mut out).is_err(),
            "flip at {i} accepted"
        );
    }
}

#[test]
fn truncated_and_extended_values_are_rejected() {
    let id = identity(KvElem::F16);
    let n = id.layout.block_bytes().unwrap();
    let bytes = encode(&id, &[0; 4], &f16_block(n), Encoding::Lz4).unwrap();
    let mut out = vec![0; n];
    for len in [
        0,
        7,
        HEADER_BYTES - 1,
        HEADER_BYTES,
        HEADER_BYTES + 15,
        bytes.len() - 1,
    ] {
        let err = decode_into(&bytes[..len], &expect(&id), &mut out).unwrap_err();
        assert!(err.is_corrupt(), "{len}: {err}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        decode_into(&longer, &expect(&id), &mut out),
        Err(CodecError::LengthMismatch { .. })
    ));
}

#[test]
fn malformed_headers_and_huge_lengths_fail_before_allocating() {
    let id = identity(KvElem::F16);
    let n = id.layout.block_bytes().unwrap();
    let good = encode(&id, &[0; 4], &f16_block(n), Encoding::Raw).unwrap();
    let patch = |at: usize, v: &[u8]| {
        let mut b = good.clone();
        b[at..at + v.len()].copy_from_slice(v);
        b
    };
    assert_eq!(
        parse_header(&patch(0, b"NOTABLOK")).unwrap_err(),
        CodecError::BadMagic
    );
    assert_eq!(
        parse_header(&patch(8, &3u16.to_le_bytes())).unwrap_err(),
        CodecError::UnsupportedVersion(3)
    );
    assert!(matches!(
        parse_header(&patch(10, &[9])),
        Err(CodecError::UnknownCode { .. })
    ));
    assert!(matches!(
        parse_header(&patch(11, &[200])),
        Err(CodecError::UnknownCode { .. })
    ));
    assert!(matches!(
        parse_header(&patch(20, &u32::MAX.to_le_bytes())),
        Err(CodecError::OutOfRange { .. })
    ));
    assert!(matches!(
        parse_header(&patch(20, &0u32.to_le_bytes())),
        Err(CodecError::OutOfRange { .. })
    ));
    assert!(matches!(
        parse_header(&patch(120, &u64::MAX.to_le_bytes())),
        Err(CodecError::OutOfRange { .. })
    ));
    assert!(matches!(
        parse_header(&patch(128, &u64::MAX.to_le_bytes())),
        Err(CodecError::LengthMismatch { .. })
    ));
    // A layout whose size overflows is refused by verify, never allocated.
    let huge = patch(12, &u32::MAX.to_le_bytes());
    let huge = {
        let mut b = huge;
        b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        b
    };
    assert!(verify(&huge).is_err());
    // A declared block size of 4096 tokens with only a few bytes present is truncated.
    let big_b = patch(20, &4096u32.to_le_bytes());
    assert!(matches!(
        parse_header(&big_b),
        Err(CodecError::Truncated { .. }) | Err(CodecError::LengthMismatch { .. })
    ));
}

#[test]
fn identity_mismatches_are_foreign() {
    let id = identity(KvElem::F16);
    let n = id.layout.block_bytes().unwrap();
    let bytes = encode(&id, &[1, 2, 3, 4], &f16_block(n), Encoding::Raw).unwrap();
    let mut out = vec![0; n];
    let base = expect(&id);
    let cases: Vec<(Expect<'_>, &str)> = vec![
        (
            Expect {
                model: ModelFingerprint([2; 32]),
                ..base
            },
            "model fingerprint",
        ),
        (
            Expect {
                hash: BlockHash([8; 32]),
                ..base
            },
            "block hash",
        ),
        (
            Expect {
                root: Some(BlockHash::root(
                    &id.model,
                    KvElem::F16,
                    4,
                    &NamespaceSalt::derive("b"),
                )),
                salt: Some(NamespaceSalt::derive("b")),
                ..base
            },
            "namespace salt",
        ),
        (
            // A host-form value is checked by its salt: a root no registered salt gives
            // accepts none.
            Expect {
                root: Some(BlockHash::root(&id.model, KvElem::F16, 4, &id.salt)),
                salt: None,
                ..base
            },
            "namespace salt",
        ),
        (
            Expect {
                tokens: Some(&[1, 2, 3, 5]),
                ..base
            },
            "token ids",
        ),
    ];
    for (e, field) in cases {
        assert_eq!(
            decode_into(&bytes, &e, &mut out),
            Err(CodecError::Foreign(field))
        );
    }
    let other_elem = Expect {
        layout: layout(KvElem::F32),
        ..base
    };
    assert_eq!(
        decode_into(
            &bytes,
            &other_elem,
            &mut vec![0; layout(KvElem::F32).block_bytes().unwrap()]
        ),
        Err(CodecError::Foreign("K/V element type"))
    );
    let own_root = Expect {
        root: Some(BlockHash::root(&id.model, KvElem::F16, 4, &id.salt)),
        salt: Some(id.salt),
        tokens: Some(&[1, 2, 3, 4]),
        ..base
    };
    assert!(decode_into(&bytes, &own_root, &mut out).is_ok());
}

#[test]
fn shared_form_carries_the_root_never_the_salt() {
    let id = identity(KvElem::F16);
    let data = f16_block(layout(KvElem::F16).block_bytes().unwrap());
    let root = BlockHash::root(&id.model, KvElem::F16, 4, &id.salt);
    let bytes = encode_shared(&id, &root, &[1, 2, 3, 4], &data, Encoding::Lz4).unwrap();
    assert_eq!(
        u16::from_le_bytes([bytes[8], bytes[9]]),
        FORMAT_VERSION_SHARED
    );
    assert!(
        !bytes.windows(32).any(|w| w == id.salt.0),
        "salt in a shared value"
    );
    assert_eq!(&bytes[56..88], &root.0);
    let h = verify(&bytes).unwrap();
    assert!(h.shared);
    let mut out = vec![0; data.len()];
    let own = Expect {
        root: Some(root),
        tokens: Some(&[1, 2, 3, 4]),
        ..expect(&id)
    };
    assert_eq!(decode_into(&bytes, &own, &mut out), Ok(Encoding::Lz4));
    assert_eq!(out, data);
    let other_salt = NamespaceSalt([9; 32]);
    let foreign = Expect {
        root: Some(BlockHash::root(&id.model, KvElem::F16, 4, &other_salt)),
        ..own
    };
    assert_eq!(
        decode_into(&bytes, &foreign, &mut out),
        Err(CodecError::Foreign("namespace salt"))
    );
    let mut flipped = bytes.clone();
    flipped[60] ^= 1;
    assert_eq!(
        decode_into(&flipped, &own, &mut out),
        Err(CodecError::Checksum)
    );
}
