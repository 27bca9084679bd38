//! Tests of the synthesizer across architectures and mixes: every architecture's tiny model, of
//! one type and of the Q4_K_M mix, loads in memoria and runs a forward pass; the mix's types
//! follow llama-quantize's rule; presets have the released models' shapes.

use memoria_kernels::GgmlType;

use super::presets::{PRESETS, preset};
use super::*;
use crate::gguf::GgufFile;
use crate::llama::{BatchToken, KvDtype, Model, Scratch};

fn read_back(spec: &SynthSpec) -> GgufFile {
    GgufFile::from_bytes(synthesize(spec).unwrap().to_bytes()).unwrap()
}

/// Logits of a 4-token prompt through `spec`'s model.
fn logits(spec: &SynthSpec) -> (Model, Vec<f32>) {
    let what = format!("{} {}", spec.arch.name(), spec.ty);
    let model = Model::from_gguf(read_back(spec)).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut kv = model.new_contiguous_kv(KvDtype::F32, 1, 8);
    let mut scratch = Scratch::default();
    let batch: Vec<BatchToken> = [5u32, 300, 17, 420]
        .into_iter()
        .enumerate()
        .map(|(pos, token)| BatchToken {
            token,
            pos,
            seq: 0,
            logits: true,
        })
        .collect();
    let out = model
        .forward(&batch, &mut kv, &mut scratch)
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .to_vec();
    (model, out)
}

#[test]
fn every_architecture_loads_and_runs_in_every_mix() {
    for arch in Arch::ALL {
        for ty in [
            WeightTypes::Single(GgmlType::F32),
            WeightTypes::Single(GgmlType::Q8_0),
            WeightTypes::Q4KM,
            WeightTypes::Mxfp4Moe,
        ] {
            let spec = SynthSpec::tiny(arch, ty);
            let (model, out) = logits(&spec);
            let hp = model.hparams();
            assert_eq!(hp.arch.name(), arch.name());
            assert_eq!((hp.n_layer, hp.n_embd, hp.head_dim), (2, 256, 64));
            assert_eq!(out.len(), 4 * 512, "{arch:?} {ty}");
            assert!(out.iter().all(|v| v.is_finite()), "{arch:?} {ty}");
            assert_eq!(
                hp.moe.map(|m| (m.n_expert, m.n_used)),
                spec.moe.map(|m| (m.experts, m.used))
            );
            assert_eq!(
                hp.swa.as_ref().map(|s| s.window),
                arch.default_window()
                    .filter(|_| arch != Arch::Gemma3 || spec.window().is_some()),
                "{arch:?}"
            );
        }
    }
}

/// The quantized logits stay near the F32 model's for every architecture: each tensor is read
/// as the type it was written.
#[test]
fn quantized_architectures_stay_near_f32() {
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    for arch in Arch::ALL {
        let (_, want) = logits(&SynthSpec::tiny(arch, GgmlType::F32));
        for ty in [
            WeightTypes::Single(GgmlType::Q8_0),
            WeightTypes::Q4KM,
            WeightTypes::Mxfp4Moe,
        ] {
            let (_, got) = logits(&SynthSpec::tiny(arch, ty));
            let diff: Vec<f32> = got.iter().zip(&want).map(|(a, b)| a - b).collect();
            let rel = norm(&diff) / norm(&want);
            assert!(rel < 0.3, "{arch:?} {ty}: relative logit error {rel}");
        }
    }
}

/// Tensor names of each architecture, per layer (tiny shapes: 2 layers).
#[test]
fn architectures_have_their_tensors() {
    let names = |arch: Arch| -> Vec<String> {
        let f = read_back(&SynthSpec::tiny(arch, GgmlType::F32));
        f.tensors()
            .iter()
            .filter_map(|t| t.name.strip_prefix("blk.1."))
            .map(str::to_owned)
            .collect()
    };
    let phi3 = names(Arch::Phi3);
    assert!(
        phi3.contains(&"attn_qkv.weight".to_owned()) && !phi3.contains(&"attn_q.weight".to_owned())
    );
    let gpt = names(Arch::GptOss);
    for t in [
        "attn_sinks.weight",
        "ffn_gate_inp.bias",
        "ffn_down_exps.bias",
        "attn_output.bias",
    ] {
        assert!(gpt.contains(&t.to_owned()), "gpt-oss {t}");
    }
    assert!(!gpt.contains(&"ffn_norm.weight".to_owned()));
    let olmo = names(Arch::Olmo2);
    assert!(!olmo.contains(&"attn_norm.weight".to_owned()));
    assert!(olmo.contains(&"post_ffw_norm.weight".to_owned()));
    let f = read_back(&SynthSpec::tiny(Arch::Olmo2, GgmlType::F32));
    assert_eq!(f.tensor("blk.0.attn_q_norm.weight").unwrap().dims, [256]);
    assert_eq!(f.tensor("blk.0.attn_k_norm.weight").unwrap().dims, [128]);
    let f = read_back(&SynthSpec::tiny(Arch::Phi3, GgmlType::F32));
    assert_eq!(f.tensor("blk.0.ffn_up.weight").unwrap().dims, [256, 1024]);
    assert_eq!(f.tensor("rope_factors_long.weight").unwrap().dims, [32]);
    assert_eq!(
        f.get_array("tokenizer.ggml.tokens")
            .unwrap()
            .as_strings()
            .unwrap()[511],
        "<|endoftext|>"
    );
    let f = read_back(&SynthSpec::tiny(Arch::Qwen3Moe, GgmlType::F32));
    assert_eq!(
        f.tensor("blk.0.ffn_down_exps.weight").unwrap().dims,
        [256, 256, 4]
    );
    assert_eq!(
        f.tensor("blk.0.ffn_gate_inp.weight").unwrap().ty,
        GgmlType::F32
    );
    assert!(
        read_back(&SynthSpec::tiny(Arch::Gemma2, GgmlType::F32))
            .tensor("output.weight")
            .is_none()
    );
}

/// Q4_K_M of a 28-layer model: the output and the tied embedding Q6_K, attn_v and ffn_down
/// Q6_K on the more-bits layers, the rest Q4_K; norms F32.
#[test]
fn q4_k_m_assigns_llama_quantize_types() {
    let spec = SynthSpec {
        layers: 28,
        tied_embeddings: true,
        ..SynthSpec::tiny(Arch::Qwen3, WeightTypes::Q4KM)
    };
    let f = read_back(&spec);
    let ty = |name: &str| f.tensor(name).unwrap().ty;
    assert_eq!(ty("token_embd.weight"), GgmlType::Q6K);
    let six = [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27];
    for i in 0..28 {
        let want = if six.contains(&i) {
            GgmlType::Q6K
        } else {
            GgmlType::Q4K
        };
        assert_eq!(ty(&format!("blk.{i}.attn_v.weight")), want, "attn_v {i}");
        assert_eq!(
            ty(&format!("blk.{i}.ffn_down.weight")),
            want,
            "ffn_down {i}"
        );
        for t in ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"] {
            assert_eq!(ty(&format!("blk.{i}.{t}.weight")), GgmlType::Q4K, "{t} {i}");
        }
        assert_eq!(ty(&format!("blk.{i}.attn_q_norm.weight")), GgmlType::F32);
    }
    assert_eq!(f.get_u32("general.file_type"), Some(15));
    // Untied: the embedding stays Q4_K, the output is Q6_K.
    let f = read_back(&SynthSpec::tiny(Arch::Llama, WeightTypes::Q4KM));
    assert_eq!(f.tensor("token_embd.weight").unwrap().ty, GgmlType::Q4K);
    assert_eq!(f.tensor("output.weight").unwrap().ty, GgmlType::Q6K);
    // Rows that are not a multiple of 256 fall back: Q4_K to Q5_0, Q6_K to Q8_0.
    let spec = SynthSpec {
        dim: 288,
        heads: 4,
        ffn: 320,
        ..SynthSpec::tiny(Arch::Llama, WeightTypes::Q4KM)
    };
    let f = read_back(&spec);
    let ty = |name: &str| f.tensor(name).unwrap().ty;
    assert_eq!(ty("output.weight"), GgmlType::Q8_0);
    assert_eq!(ty("token_embd.weight"), GgmlType::Q5_0);
    assert_eq!(ty("blk.0.attn_q.weight"), GgmlType::Q5_0);
    assert_eq!(ty("blk.1.ffn_down.weight"), GgmlType::Q8_0);
    assert_eq!(ty("blk.0.ffn_down.weight"), GgmlType::Q5_0);
}

/// The presets have the released models' shapes and make valid specs; the big ones are only
/// planned here (their files are gigabytes), the tensor count checked.
#[test]
fn presets_have_the_released_shapes() {
    for (name, _) in PRESETS {
        let spec = preset(name, WeightTypes::Q4KM).unwrap();
        validate(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(preset("qwen3-9b", WeightTypes::Q4KM).is_none());
    let q = preset("Qwen3-4B", WeightTypes::Q4KM).unwrap();
    assert_eq!(
        (q.layers, q.dim, q.heads, q.kv_heads, q.head_dim(), q.ffn),
        (36, 2560, 32, 8, 128, 9728)
    );
    let m = preset("qwen3-30b-a3b", WeightTypes::Q4KM).unwrap();
    assert_eq!(
        (m.layers, m.heads, m.kv_heads, m.tied_embeddings),
        (48, 32, 4, false)
    );
    assert_eq!(
        m.moe,
        Some(SynthMoe {
            experts: 128,
            used: 8,
            ffn: 768
        })
    );
    let half = preset("qwen3-30b-a3b-half", WeightTypes::Q4KM).unwrap();
    assert_eq!(SynthSpec { layers: 48, ..half }, m);
    let g = preset("gemma2-2b", GgmlType::Q8_0.into()).unwrap();
    assert_eq!(
        (g.layers, g.dim, g.head_dim(), g.window(), g.vocab.clone()),
        (26, 2304, 256, Some(4096), SynthVocab::Size(256_000))
    );
    let p = preset("phi3-mini", WeightTypes::Q4KM).unwrap();
    assert_eq!(
        (p.layers, p.dim, p.head_dim(), p.kv_heads, p.context),
        (32, 3072, 96, 32, 131_072)
    );
    let o = preset("gpt-oss-20b", WeightTypes::Mxfp4Moe).unwrap();
    assert_eq!(
        (o.layers, o.dim, o.heads, o.kv_heads, o.q_dim(), o.window()),
        (24, 2880, 64, 8, 4096, Some(128))
    );
    let tensors = plan::plan(&o, 201_088);
    let types = plan::types(&o, &tensors);
    let at = |n: &str| types[tensors.iter().position(|t| t.name == n).unwrap()];
    assert_eq!(at("blk.3.ffn_down_exps.weight"), GgmlType::Mxfp4);
    assert_eq!(at("blk.3.attn_q.weight"), GgmlType::Q8_0);
    let tensors = plan::plan(&m, 151_936);
    // token_embd, output_norm, output, then 12 per layer.
    assert_eq!(tensors.len(), 3 + 48 * 12);
    let types = plan::types(&m, &tensors);
    let at = |n: &str| types[tensors.iter().position(|t| t.name == n).unwrap()];
    assert_eq!(at("blk.0.ffn_down_exps.weight"), GgmlType::Q6K);
    assert_eq!(at("blk.6.ffn_down_exps.weight"), GgmlType::Q4K);
    assert_eq!(at("blk.6.ffn_up_exps.weight"), GgmlType::Q4K);
    assert_eq!(at("output.weight"), GgmlType::Q6K);
}

/// MXFP4_MOE: the experts MXFP4, every other matrix Q8_0 (the embedding and output too).
#[test]
fn mxfp4_moe_puts_the_experts_in_mxfp4() {
    let f = read_back(&SynthSpec::tiny(Arch::GptOss, WeightTypes::Mxfp4Moe));
    let ty = |name: &str| f.tensor(name).unwrap().ty;
    for t in ["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"] {
        assert_eq!(ty(&format!("blk.1.{t}.weight")), GgmlType::Mxfp4, "{t}");
    }
    for t in [
        "token_embd.weight",
        "output.weight",
        "blk.0.attn_q.weight",
        "blk.0.attn_output.weight",
    ] {
        assert_eq!(ty(t), GgmlType::Q8_0, "{t}");
    }
    assert_eq!(ty("blk.0.ffn_gate_inp.weight"), GgmlType::F32);
    assert_eq!(ty("blk.0.ffn_down_exps.bias"), GgmlType::F32);
    assert_eq!(f.get_u32("general.file_type"), Some(38));
}

#[test]
fn architecture_constraints_are_errors() {
    let bad = |spec: SynthSpec| matches!(synthesize(&spec), Err(SynthError::BadSpec(_)));
    assert!(bad(SynthSpec {
        tied_embeddings: false,
        ..SynthSpec::tiny(Arch::Gemma2, GgmlType::F32)
    }));
    assert!(bad(SynthSpec {
        tied_embeddings: true,
        ..SynthSpec::tiny(Arch::GptOss, GgmlType::F32)
    }));
    assert!(bad(SynthSpec {
        moe: None,
        ..SynthSpec::tiny(Arch::Qwen3Moe, GgmlType::F32)
    }));
    assert!(bad(SynthSpec {
        moe: Some(SynthMoe {
            experts: 4,
            used: 5,
            ffn: 256
        }),
        ..SynthSpec::tiny(Arch::Qwen3Moe, GgmlType::F32)
    }));
    assert!(bad(SynthSpec {
        moe: SynthSpec::tiny(Arch::GptOss, GgmlType::F32).moe,
        ..SynthSpec::tiny(Arch::Llama, GgmlType::F32)
    }));
    assert!(bad(SynthSpec {
        head_dim: Some(128),
        ..SynthSpec::tiny(Arch::Olmo2, GgmlType::F32)
    }));
    assert!(bad(SynthSpec {
        window: Some(8),
        ..SynthSpec::tiny(Arch::Qwen3, GgmlType::F32)
    }));
    assert!(bad(SynthSpec {
        rope_base: 0.0,
        ..SynthSpec::tiny(Arch::Qwen3, GgmlType::F32)
    }));
    assert!(bad(SynthSpec {
        layers: 5000,
        ..SynthSpec::tiny(Arch::Qwen3, GgmlType::F32)
    }));
    // A head size other than dim / heads is fine where llama.cpp reads key_length.
    let spec = SynthSpec {
        head_dim: Some(128),
        ..SynthSpec::tiny(Arch::Qwen3, GgmlType::Q4K)
    };
    let f = read_back(&spec);
    assert_eq!(f.get_u32("qwen3.attention.key_length"), Some(128));
    assert_eq!(f.tensor("blk.0.attn_q.weight").unwrap().dims, [256, 512]);
    // A Phi-3 vocabulary without <|endoftext|> would crash llama.cpp.
    let spec = SynthSpec {
        vocab: SynthVocab::FromFile(std::path::PathBuf::from("/nonexistent.gguf")),
        ..SynthSpec::tiny(Arch::Phi3, GgmlType::F32)
    };
    assert!(matches!(synthesize(&spec), Err(SynthError::Vocab { .. })));
}
