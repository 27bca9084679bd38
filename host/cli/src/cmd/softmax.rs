//! Log-softmax of one row of f32 logits, computed in f64 (as llama-perplexity sums its
//! exponentials in double), and the top-k candidates of a row, best first.

/// The log of the softmax normaliser of `logits`: `max + ln Σ exp(l - max)`, in f64.
/// `logprob(i) = logits[i] - log_norm(logits)`. `-inf` for an empty row.
pub fn log_norm(logits: &[f32]) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    if !max.is_finite() {
        return max;
    }
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    max + sum.ln()
}

/// The log-probability of token `id` in `logits`; `None` when `id` is out of the row.
pub fn logprob(logits: &[f32], id: u32) -> Option<f64> {
    let l = *logits.get(id as usize)?;
    Some(l as f64 - log_norm(logits))
}

/// The `k` most likely tokens of `logits` with their log-probabilities, best first; ties go to
/// the lower id. NaN logits rank last.
pub fn top_k(logits: &[f32], k: usize) -> Vec<(u32, f64)> {
    let norm = log_norm(logits);
    let better = |a: &(u32, f32), b: &(u32, f32)| {
        b.1.partial_cmp(&a.1)
            .unwrap_or_else(|| a.1.is_nan().cmp(&b.1.is_nan()))
            .then(a.0.cmp(&b.0))
    };
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    for (i, &l) in logits.iter().enumerate() {
        if k == 0 {
            break;
        }
        let c = (i as u32, l);
        if best.len() == k && better(&c, &best[k - 1]) != std::cmp::Ordering::Less {
            continue;
        }
        let at = best.partition_point(|b| better(b, &c) == std::cmp::Ordering::Less);
        best.insert(at, c);
        best.truncate(k);
    }
    best.into_iter()
        .map(|(i, l)| (i, l as f64 - norm))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_matches_direct_formula() {
        let logits = [1.0f32, 2.0, 3.0, -1.0];
        let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
        for (i, &l) in logits.iter().enumerate() {
            let want = (l as f64).exp() / z;
            let got = logprob(&logits, i as u32).expect("in range").exp();
            assert!((want - got).abs() < 1e-12, "{i}: {want} vs {got}");
        }
        assert_eq!(logprob(&logits, 4), None);
    }

    #[test]
    fn log_norm_is_stable_for_large_logits() {
        let logits = [1000.0f32, 1000.0];
        assert!((log_norm(&logits) - (1000.0 + 2f64.ln())).abs() < 1e-9);
        assert_eq!(log_norm(&[]), f64::NEG_INFINITY);
    }

    #[test]
    fn top_k_is_sorted_best_first_with_low_id_on_ties() {
        let logits = [0.5f32, 3.0, 3.0, -2.0, 1.0, f32::NAN];
        let top = top_k(&logits, 3);
        let ids: Vec<u32> = top.iter().map(|t| t.0).collect();
        assert_eq!(ids, vec![1, 2, 4]);
        let top = top_k(&logits[..5], 3);
        assert!(top[0].1 >= top[1].1 && top[1].1 >= top[2].1, "{top:?}");
        assert_eq!(top_k(&logits, 0), vec![]);
        assert_eq!(top_k(&logits[..2], 5).len(), 2);
        let total: f64 = top_k(&logits[..5], 5).iter().map(|t| t.1.exp()).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }
}
