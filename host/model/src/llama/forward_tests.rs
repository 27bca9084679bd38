//! Thread and chunk invariance of the forward pass on long contexts.

use memoria_kernels::GgmlType;
use memoria_kernels::threads::Pool;

use crate::gguf::GgufFile;
use crate::llama::{BatchToken, Scratch};
use crate::llama::{KvDtype, Model};
use crate::synth::{self, Arch, SynthSpec};

/// Every position's logits of `tokens` run as a prefill of `prefill` tokens, then one token
/// at a time, on a pool of `threads`.
fn run(model: &Model, tokens: &[u32], prefill: usize, dtype: KvDtype, threads: usize) -> Vec<u32> {
    let pool = Pool::new(threads);
    let mut kv = model.new_contiguous_kv(dtype, 1, tokens.len());
    let mut s = Scratch::default();
    let mut all = Vec::new();
    let tok = |pos: usize| BatchToken {
        token: tokens[pos],
        pos,
        seq: 0,
        logits: true,
    };
    pool.install(|| {
        let batch: Vec<BatchToken> = (0..prefill).map(tok).collect();
        all.extend_from_slice(model.forward(&batch, &mut kv, &mut s).expect("prefill"));
        for pos in prefill..tokens.len() {
            all.extend_from_slice(model.forward(&[tok(pos)], &mut kv, &mut s).expect("decode"));
        }
    });
    all.iter().map(|v| v.to_bits()).collect()
}

/// Decode past `SPLIT_MIN_POS` with a single K/V head (the split attention path) gives the
/// same bits on 1, 2 and 3 threads, and the same bits as a prefill of the whole sequence
/// (which runs one attention task per token).
#[test]
fn long_context_decode_is_thread_and_chunk_invariant() {
    let spec = SynthSpec {
        kv_heads: 1,
        context: 320,
        ..SynthSpec::tiny(Arch::Llama, GgmlType::Q8_0)
    };
    let bytes = synth::synthesize(&spec).expect("synthesize").to_bytes();
    let model = Model::from_gguf(GgufFile::from_bytes(bytes).expect("parse")).expect("load");
    let tokens: Vec<u32> = (0..300).map(|i| (7 + i * 37) % 512).collect();
    for dtype in [KvDtype::F16, KvDtype::F32] {
        let one = run(&model, &tokens, 260, dtype, 1);
        assert!(one.iter().all(|b| f32::from_bits(*b).is_finite()));
        assert_eq!(
            one,
            run(&model, &tokens, 260, dtype, 2),
            "{dtype:?} 2 threads"
        );
        assert_eq!(
            one,
            run(&model, &tokens, 260, dtype, 3),
            "{dtype:?} 3 threads"
        );
        assert_eq!(
            one,
            run(&model, &tokens, 300, dtype, 2),
            "{dtype:?} whole prefill"
        );
    }
}

/// A scratch made for `rows` tokens never reallocates for passes up to that size, whatever
/// share of their rows want logits (a decode step's drafts can reach a new peak at any time):
/// split and fused Q/K/V, local RoPE tables, and a mixture of experts' shared buffers.
#[test]
fn a_scratch_for_rows_is_not_reallocated_by_passes_that_fit() {
    const ROWS: usize = 24;
    for arch in [Arch::Llama, Arch::Phi3, Arch::Gemma3, Arch::Qwen3Moe] {
        let spec = SynthSpec {
            context: 128,
            ..SynthSpec::tiny(arch, GgmlType::Q8_0)
        };
        let bytes = synth::synthesize(&spec).expect("synthesize").to_bytes();
        let model = Model::from_gguf(GgufFile::from_bytes(bytes).expect("parse")).expect("load");
        let mut kv = model.new_contiguous_kv(KvDtype::F16, 2, 128);
        let mut s = Scratch::for_rows(&model, ROWS);
        let before = s.footprint();
        let token = |seq: usize, pos: usize, logits: bool| BatchToken {
            token: ((pos * 31 + seq * 7) % 400) as u32,
            pos,
            seq,
            logits,
        };
        // A prefill with one logits row, then full-size passes with every row's logits.
        let prefill: Vec<BatchToken> = (0..ROWS).map(|p| token(0, p, p == ROWS - 1)).collect();
        model.forward(&prefill, &mut kv, &mut s).expect("prefill");
        let every: Vec<BatchToken> = (0..ROWS / 2)
            .flat_map(|p| [token(0, ROWS + p, true), token(1, p, true)])
            .collect();
        let logits = model.forward(&every, &mut kv, &mut s).expect("all rows");
        assert_eq!(logits.len(), ROWS * model.hparams().n_vocab);
        model
            .forward(&[token(1, ROWS / 2, true)], &mut kv, &mut s)
            .expect("decode");
        assert_eq!(s.footprint(), before, "{arch:?}: a buffer was reallocated");
    }
}

/// Room the allocator cannot grant (rows × vocabulary past the address space) is skipped, not
/// an abort: the buffers then grow on demand, and a pass runs as usual.
#[test]
fn a_scratch_for_more_rows_than_memory_still_runs() {
    let spec = SynthSpec {
        context: 64,
        ..SynthSpec::tiny(Arch::Llama, GgmlType::Q8_0)
    };
    let bytes = synth::synthesize(&spec).expect("synthesize").to_bytes();
    let model = Model::from_gguf(GgufFile::from_bytes(bytes).expect("parse")).expect("load");
    let mut kv = model.new_contiguous_kv(KvDtype::F16, 1, 64);
    for rows in [usize::MAX / 4, 1 << 40] {
        let mut s = Scratch::for_rows(&model, rows);
        let batch = [BatchToken {
            token: 3,
            pos: 0,
            seq: 0,
            logits: true,
        }];
        let logits = model.forward(&batch, &mut kv, &mut s).expect("pass");
        assert_eq!(logits.len(), model.hparams().n_vocab);
        kv = model.new_contiguous_kv(KvDtype::F16, 1, 64);
    }
}
