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
