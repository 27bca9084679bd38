//! Rendezvous (highest-random-weight) ranking of backends for one routing key, weighted by load.
//!
//! Each backend scores `w / -ln(u)`, where `u` in (0, 1) is a BLAKE3 hash of the key and the
//! backend's address and `w = 1 / (1 + load / load_scale)`. With equal loads this is plain
//! rendezvous hashing: a key always prefers the same backend, and removing a backend moves only
//! its own keys. A loaded backend keeps its keys in proportion to its weight, so one hot prefix
//! cannot pile an unbounded queue onto one host while the others idle.

use memoria_kv::BlockHash;

/// `u` in (0, 1) for `key` on the backend named `name`.
fn unit(key: &BlockHash, name: &str) -> f64 {
    let mut h = blake3::Hasher::new();
    h.update(b"memoria-route-hrw-v1");
    h.update(&key.0);
    h.update(name.as_bytes());
    let bytes = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes.as_bytes()[..8]);
    // 53 random bits, offset by half a step so the result is never 0 or 1.
    let bits = u64::from_le_bytes(first) >> 11;
    (bits as f64 + 0.5) / (1u64 << 53) as f64
}

/// The weight of a backend with `load` requests queued or in flight.
pub fn weight(load: u64, load_scale: f64) -> f64 {
    let scale = if load_scale.is_finite() && load_scale > 0.0 {
        load_scale
    } else {
        1.0
    };
    1.0 / (1.0 + load as f64 / scale)
}

/// The score of one backend (higher is preferred).
pub fn score(key: &BlockHash, name: &str, load: u64, load_scale: f64) -> f64 {
    weight(load, load_scale) / -unit(key, name).ln()
}

/// One backend as ranking sees it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    pub name: &'a str,
    pub up: bool,
    pub load: u64,
}

/// Backend indices best first: backends that are up by score, then those marked down (a last
/// resort: the health poll may be stale) by score.
pub fn rank(key: &BlockHash, backends: &[Candidate<'_>], load_scale: f64) -> Vec<usize> {
    let mut scored: Vec<(bool, f64, usize)> = backends
        .iter()
        .enumerate()
        .map(|(i, b)| (b.up, score(key, b.name, b.load, load_scale), i))
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(&b.2)));
    scored.into_iter().map(|(_, _, i)| i).collect()
}

/// Backend indices best first when `matched[i]` leading blocks of the prompt are known to be
/// on backend `i` (`--events`). With no match anywhere this is [`rank`]. Otherwise backends
/// that are up come first, ordered by `(1 + matched) × weight(load)`, ties by the rendezvous
/// score: the longest cached prefix wins while loads are equal, and a host holding `m` blocks
/// loses its claim once its load passes about `m × load_scale` more than an idle host's, so a
/// hot prefix cannot flood one host.
pub fn rank_by_prefix(
    key: &BlockHash,
    backends: &[Candidate<'_>],
    matched: &[usize],
    load_scale: f64,
) -> Vec<usize> {
    let m = |i: usize| matched.get(i).copied().unwrap_or(0);
    if !backends.iter().enumerate().any(|(i, b)| b.up && m(i) > 0) {
        return rank(key, backends, load_scale);
    }
    let mut scored: Vec<(bool, f64, f64, usize)> = backends
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let value = (1.0 + m(i) as f64) * weight(b.load, load_scale);
            (b.up, value, score(key, b.name, b.load, load_scale), i)
        })
        .collect();
    scored.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(b.1.total_cmp(&a.1))
            .then(b.2.total_cmp(&a.2))
            .then(a.3.cmp(&b.3))
    });
    scored.into_iter().map(|(_, _, _, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> BlockHash {
        BlockHash(*blake3::hash(&i.to_le_bytes()).as_bytes())
    }

    fn three(loads: [u64; 3], up: [bool; 3]) -> Vec<Candidate<'static>> {
        ["http://a", "http://b", "http://c"]
            .iter()
            .zip(loads)
            .zip(up)
            .map(|((name, load), up)| Candidate { name, up, load })
            .collect()
    }

    #[test]
    fn keys_spread_and_stay() {
        let c = three([0; 3], [true; 3]);
        let mut counts = [0usize; 3];
        for i in 0..3000 {
            let r = rank(&key(i), &c, 8.0);
            assert_eq!(r, rank(&key(i), &c, 8.0));
            counts[r[0]] += 1;
        }
        assert!(counts.iter().all(|&n| n > 800), "{counts:?}");
    }

    #[test]
    fn a_down_backend_moves_only_its_keys() {
        let all = three([0; 3], [true; 3]);
        let down = three([0; 3], [true, false, true]);
        for i in 0..500 {
            let before = rank(&key(i), &all, 8.0);
            let after = rank(&key(i), &down, 8.0);
            assert_eq!(after[2], 1);
            if before[0] != 1 {
                assert_eq!(after[0], before[0]);
            } else {
                assert_eq!(after[0], before[1]);
            }
        }
    }

    #[test]
    fn load_sheds_keys_in_proportion() {
        let idle = three([0; 3], [true; 3]);
        let hot = three([0, 0, 24], [true; 3]);
        let (mut kept, mut had) = (0, 0);
        for i in 0..3000 {
            if rank(&key(i), &idle, 8.0)[0] == 2 {
                had += 1;
                if rank(&key(i), &hot, 8.0)[0] == 2 {
                    kept += 1;
                }
            }
        }
        // Weights 1, 1, 1/4: the hot host keeps a share of 1/9 of all keys, a third of its 1/3.
        assert!(kept * 2 < had && kept * 5 > had, "kept {kept} of {had}");
    }

    #[test]
    fn the_longest_prefix_wins_until_its_load_outweighs_it() {
        let idle = three([0; 3], [true; 3]);
        for i in 0..200 {
            // No match anywhere: plain rendezvous.
            assert_eq!(
                rank_by_prefix(&key(i), &idle, &[0, 0, 0], 8.0),
                rank(&key(i), &idle, 8.0)
            );
            // The holder of the longest prefix first, then the shorter one.
            let r = rank_by_prefix(&key(i), &idle, &[2, 0, 5], 8.0);
            assert_eq!(&r[..2], &[2, 0]);
        }
        // 4 blocks held at load 16 (value 5/3) loses to 1 block held idle (value 2)...
        let hot = three([0, 0, 16], [true; 3]);
        assert_eq!(rank_by_prefix(&key(1), &hot, &[1, 0, 4], 8.0)[0], 0);
        // ...but not at load 8 (value 5/2).
        let warm = three([0, 0, 8], [true; 3]);
        assert_eq!(rank_by_prefix(&key(1), &warm, &[1, 0, 4], 8.0)[0], 2);
        // A holder that is down is a last resort; a match on it alone changes nothing.
        let down = three([0; 3], [true, true, false]);
        assert_eq!(
            rank_by_prefix(&key(3), &down, &[0, 0, 9], 8.0),
            rank(&key(3), &down, 8.0)
        );
        assert_eq!(rank_by_prefix(&key(3), &down, &[0, 1, 9], 8.0)[..2], [1, 0]);
        // Fewer match counts than backends: the rest count as none.
        assert_eq!(rank_by_prefix(&key(3), &idle, &[3], 8.0)[0], 0);
    }

    #[test]
    fn odd_scales_do_not_break_ranking() {
        let c = three([u64::MAX, 0, 5], [true; 3]);
        for s in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(rank(&key(1), &c, s).len(), 3);
        }
    }
}
