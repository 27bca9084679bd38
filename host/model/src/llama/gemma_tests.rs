//! Gemma 3 on tiny in-memory models written with the GGUF writer: shape (query width ≠ n_embd),
//! the local/global layer pattern, sliding-window masking semantics (llama.cpp's
//! `p - p0 < window`), batch and chunk invariance across the window, and load-time checks.

use memoria_kernels::GgmlType;
use memoria_kernels::quant::quantize_row;

use super::{BatchToken, KvDtype, Model, ModelError, Scratch};
use crate::gguf::{GgufFile, GgufWriter, MetaValue};

const DIM: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = 32; // q width 128 ≠ n_embd 64, as Gemma 3 270M's 1024 ≠ 640
const FFN: usize = 128;
const VOCAB: usize = 300;
const WINDOW: usize = 4;

/// Deterministic values in `center ± width` from a 64-bit LCG seeded by `seed`.
fn values(seed: u64, n: usize, center: f32, width: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let u = (state >> 40) as f32 / (1u64 << 24) as f32;
            center + width * (2.0 * u - 1.0)
        })
        .collect()
}

/// A Gemma 3 file of `layers` blocks with 2-D weights of type `ty`; each `gemma3.*` key named
/// in `overrides` is replaced by its value, or left out for `None`.
fn gemma_bytes(layers: usize, ty: GgmlType, overrides: &[(&str, Option<MetaValue>)]) -> Vec<u8> {
    let mut w = GgufWriter::new();
    let u = |v: usize| MetaValue::U32(v as u32);
    w.set("general.architecture", MetaValue::String("gemma3".into()));
    for (k, v) in [
        ("context_length", u(64)),
        ("embedding_length", u(DIM)),
        ("block_count", u(layers)),
        ("feed_forward_length", u(FFN)),
        ("attention.head_count", u(HEADS)),
        ("attention.head_count_kv", u(KV_HEADS)),
        ("attention.key_length", u(HEAD_DIM)),
        ("attention.value_length", u(HEAD_DIM)),
        ("attention.sliding_window", u(WINDOW)),
        ("attention.layer_norm_rms_epsilon", MetaValue::F32(1e-6)),
        ("rope.freq_base", MetaValue::F32(1e6)),
    ] {
        match overrides.iter().find(|(o, _)| *o == k) {
            Some((_, Some(v))) => w.set(&format!("gemma3.{k}"), v.clone()),
            Some((_, None)) => &mut w,
            None => w.set(&format!("gemma3.{k}"), v),
        };
    }
    let mut seed = 1u64;
    let mut add = |name: &str, dims: &[usize], ty: GgmlType, center: f32, width: f32| {
        seed += 1;
        let n: usize = dims.iter().product();
        let vals = values(seed, n, center, width);
        let mut data = vec![0u8; ty.row_bytes(dims[0]).expect("row") * (n / dims[0])];
        let row_bytes = data.len() / (n / dims[0]);
        for (src, dst) in vals
            .chunks_exact(dims[0])
            .zip(data.chunks_exact_mut(row_bytes))
        {
            quantize_row(ty, src, dst).expect("quantize");
        }
        let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        w.add_tensor(name, &dims, ty, data).expect("tensor");
    };
    let f32 = GgmlType::F32;
    add("token_embd.weight", &[DIM, VOCAB], ty, 0.0, 0.1);
    add("output_norm.weight", &[DIM], f32, 1.0, 0.2);
    let (q, kv) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    for i in 0..layers {
        let n = |s: &str| format!("blk.{i}.{s}.weight");
        add(&n("attn_norm"), &[DIM], f32, 1.0, 0.2);
        add(&n("attn_q"), &[DIM, q], ty, 0.0, 0.2);
        add(&n("attn_k"), &[DIM, kv], ty, 0.0, 0.2);
        add(&n("attn_v"), &[DIM, kv], ty, 0.0, 0.2);
        add(&n("attn_q_norm"), &[HEAD_DIM], f32, 1.0, 0.2);
        add(&n("attn_k_norm"), &[HEAD_DIM], f32, 1.0, 0.2);
        add(&n("attn_output"), &[q, DIM], ty, 0.0, 0.2);
        add(&n("post_attention_norm"), &[DIM], f32, 1.0, 0.2);
        add(&n("ffn_norm"), &[DIM], f32, 1.0, 0.2);
        add(&n("ffn_gate"), &[DIM, FFN], ty, 0.0, 0.2);
        add(&n("ffn_up"), &[DIM, FFN], ty, 0.0, 0.2);
        add(&n("ffn_down"), &[FFN, DIM], ty, 0.0, 0.2);
        add(&n("post_ffw_norm"), &[DIM], f32, 1.0, 0.2);
    }
    w.to_bytes()
}

fn load(bytes: Vec<u8>) -> Result<Model, ModelError> {
    Model::from_gguf(GgufFile::from_bytes(bytes).expect("parse"))
}

fn gemma(layers: usize, ty: GgmlType) -> Model {
    load(gemma_bytes(layers, ty, &[])).expect("load")
}

/// Every position's logits of `tokens`, fed in chunks of `chunk`.
fn logits(model: &Model, tokens: &[u32], chunk: usize) -> Vec<Vec<f32>> {
    let mut kv = model.new_contiguous_kv(KvDtype::F16, 1, tokens.len());
    let mut s = Scratch::default();
    let v = model.hparams().n_vocab;
    let mut out = Vec::new();
    for (c, part) in tokens.chunks(chunk).enumerate() {
        let batch: Vec<BatchToken> = part
            .iter()
            .enumerate()
            .map(|(i, &token)| BatchToken {
                token,
                pos: c * chunk + i,
                seq: 0,
                logits: true,
            })
            .collect();
        let l = model.forward(&batch, &mut kv, &mut s).expect("forward");
        out.extend(l.chunks_exact(v).map(<[f32]>::to_vec));
    }
    out
}

#[test]
fn gemma3_shape_and_layer_pattern() {
    let model = gemma(7, GgmlType::F32);
    let hp = model.hparams();
    assert_eq!(hp.arch, super::Arch::Gemma3);
    assert_eq!((hp.head_dim, hp.q_dim(), hp.kv_dim()), (32, 128, 64));
    assert_eq!(hp.embd_scale, Some(8.0));
    assert_eq!(hp.attn_scale, 1.0 / 32f32.sqrt());
    assert_eq!(hp.ffn_act, super::FfnAct::GeluTanh);
    let windows: Vec<Option<usize>> = (0..7).map(|il| hp.layer_window(il)).collect();
    let local = Some(WINDOW);
    assert_eq!(windows, [local, local, local, local, local, None, local]);
    let lw = &model.weights().layers[0];
    let super::QkvWeights::Split { wq, .. } = &lw.qkv else {
        panic!("Gemma 3 has separate Q, K and V");
    };
    assert_eq!(
        (wq.rows, wq.cols, lw.wo.rows, lw.wo.cols),
        (128, 64, 64, 128)
    );
}

/// With one (local) layer, the logits at `p` depend on tokens `p-3..=p` only: changing token 0
/// changes positions 0..=3 and nothing from 4 on.
#[test]
fn sliding_window_hides_exactly_the_positions_window_or_more_back() {
    let model = gemma(1, GgmlType::F32);
    let a: Vec<u32> = (0..10).map(|i| 5 + i * 7).collect();
    let mut b = a.clone();
    b[0] = 200;
    let (la, lb) = (logits(&model, &a, 10), logits(&model, &b, 10));
    for p in 0..10 {
        assert_eq!(la[p] == lb[p], p >= WINDOW, "position {p}");
    }
}

/// Six layers (five local, one global): every chunking gives the same bits, also past the
/// window, with f32 and q8_0 weights.
#[test]
fn gemma3_is_chunk_invariant_across_the_window() {
    for ty in [GgmlType::F32, GgmlType::Q8_0] {
        let model = gemma(6, ty);
        let tokens: Vec<u32> = (0..13).map(|i| (3 + i * 37) % VOCAB as u32).collect();
        let whole = logits(&model, &tokens, tokens.len());
        assert!(whole.iter().flatten().all(|v| v.is_finite()), "{ty}");
        for chunk in [1, 3, 5] {
            assert!(
                whole == logits(&model, &tokens, chunk),
                "{ty} chunk {chunk}"
            );
        }
        // The global layer sees past the window: token 0 still moves the last logits.
        let mut other = tokens.clone();
        other[0] = 11;
        assert!(whole[12] != logits(&model, &other, 13)[12], "{ty}");
    }
}

#[test]
fn gemma3_load_checks() {
    let v16 = [("attention.value_length", Some(MetaValue::U32(16)))];
    let err = load(gemma_bytes(1, GgmlType::F32, &v16));
    assert!(
        matches!(err, Err(ModelError::BadHParam { ref key, .. }) if key.ends_with("value_length")),
        "{err:?}"
    );
    // As llama.cpp's gemma3 loader: without `sliding_window` no layer is windowed.
    let no_window = [("attention.sliding_window", None)];
    let model = load(gemma_bytes(7, GgmlType::F32, &no_window)).expect("loads without a window");
    assert!((0..7).all(|il| model.hparams().layer_window(il).is_none()));
    let huge = [("attention.sliding_window", Some(MetaValue::U32(u32::MAX)))];
    let err = load(gemma_bytes(1, GgmlType::F32, &huge));
    assert!(
        matches!(err, Err(ModelError::BadHParam { ref key, .. }) if key.ends_with("sliding_window")),
        "{err:?}"
    );
    // Without key_length the head size is n_embd / n_head, and the q weights no longer fit.
    let err = load(gemma_bytes(
        1,
        GgmlType::F32,
        &[("attention.key_length", None)],
    ));
    assert!(
        matches!(err, Err(ModelError::BadHParam { ref key, .. }) if key.ends_with("value_length")),
        "{err:?}"
    );
}
