//! Synthetic models against files llama.cpp's own tools wrote (`shared/golden/archs`: the
//! reference generator's F16 files, which llama.cpp loads, and llama-quantize's Q4_K_M copies):
//! for every architecture there, a synthetic model of the same shape has exactly the same
//! tensors (names, shapes, types), and its Q4_K_M mix gives every tensor llama-quantize's type.
//! Also `memoria model synth` from the command line: a preset with overrides, the Q4_K_M mix,
//! and a file that `memoria run` loads.

use std::collections::BTreeMap;
use std::path::Path;

use memoria_kernels::GgmlType;
use memoria_model::gguf::GgufFile;
use memoria_model::synth::{Arch, SynthMoe, SynthSpec, SynthVocab, WeightTypes, synthesize};

use crate::shared;

/// Every architecture of the golden set, with its quantized copy.
const GOLDEN: [(&str, &str); 9] = [
    ("llama", "q8_0"),
    ("qwen3", "q4_k_m"),
    ("qwen3moe", "q4_k_m"),
    ("phi3", "q8_0"),
    ("gemma2", "q4_k_m"),
    ("granite", "q8_0"),
    ("smollm3", "q8_0"),
    ("olmo2", "q8_0"),
    ("gpt-oss", "mxfp4"),
];

fn golden(arch: &str, ty: &str) -> GgufFile {
    let rel = format!("golden/archs/{arch}/{arch}-{ty}.gguf");
    GgufFile::open(shared::path(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A synthetic spec of `f`'s shape, with its tokenizer, of types `ty`.
fn spec_like(f: &GgufFile, vocab: &Path, ty: WeightTypes) -> SynthSpec {
    let a = f.get_str("general.architecture").expect("architecture");
    let arch = Arch::parse(a).unwrap_or_else(|| panic!("{a}"));
    let u = |k: &str| f.get_u32(&format!("{a}.{k}")).map(|v| v as usize);
    let need = |k: &str| u(k).unwrap_or_else(|| panic!("{a}.{k}"));
    SynthSpec {
        arch,
        dim: need("embedding_length"),
        layers: need("block_count"),
        heads: need("attention.head_count"),
        kv_heads: need("attention.head_count_kv"),
        head_dim: u("attention.key_length"),
        ffn: need("feed_forward_length"),
        moe: u("expert_count").map(|experts| SynthMoe {
            experts,
            used: need("expert_used_count"),
            ffn: need("expert_feed_forward_length"),
        }),
        window: u("attention.sliding_window").filter(|_| arch != Arch::Phi3),
        vocab: SynthVocab::FromFile(vocab.to_path_buf()),
        ty,
        context: need("context_length"),
        seed: 1,
        rope_base: 10000.0,
        tied_embeddings: f.tensor("output.weight").is_none(),
    }
}

/// Name → (dims, type) of every tensor.
fn tensors(f: &GgufFile) -> BTreeMap<String, (Vec<u64>, GgmlType)> {
    f.tensors()
        .iter()
        .map(|t| (t.name.clone(), (t.dims.clone(), t.ty)))
        .collect()
}

fn synth_file(spec: &SynthSpec) -> GgufFile {
    let bytes = synthesize(spec)
        .unwrap_or_else(|e| panic!("{:?}: {e}", spec.arch))
        .to_bytes();
    GgufFile::from_bytes(bytes).expect("synthetic file")
}

/// The F16 synthetic model of each golden shape has the golden F16 file's tensors exactly:
/// nothing missing, nothing extra (llama.cpp refuses both), the same shapes and types.
#[test]
fn synth_tensors_are_the_reference_generators() {
    for (arch, _) in GOLDEN {
        let rel = format!("golden/archs/{arch}/{arch}-f16.gguf");
        let f = golden(arch, "f16");
        let spec = spec_like(&f, &shared::path(&rel), GgmlType::F16.into());
        let got = synth_file(&spec);
        assert_eq!(tensors(&got), tensors(&f), "{arch}");
        for key in [
            "attention.key_length",
            "expert_count",
            "attention.sliding_window",
        ] {
            let k = format!("{arch}.{key}");
            if arch != "phi3" {
                assert_eq!(got.get_u32(&k), f.get_u32(&k), "{k}");
            }
        }
    }
}

/// The Q4_K_M mix of each golden shape that llama-quantize made a Q4_K_M copy of gives every
/// tensor the type llama-quantize gave it (qwen3moe has 8 experts: its attn_v and attn_k are
/// Q8_0, attn_output Q5_K; its expert rows of 64 fall back to Q5_0 and Q8_0).
#[test]
fn synth_q4_k_m_types_are_llama_quantizes() {
    for (arch, ty) in GOLDEN.iter().filter(|(_, t)| *t == "q4_k_m") {
        let rel = format!("golden/archs/{arch}/{arch}-f16.gguf");
        let f16 = golden(arch, "f16");
        let spec = spec_like(&f16, &shared::path(&rel), WeightTypes::Q4KM);
        let got = synth_file(&spec);
        let want = golden(arch, ty);
        assert_eq!(tensors(&got), tensors(&want), "{arch}");
        assert_eq!(
            got.get_u32("general.file_type"),
            want.get_u32("general.file_type")
        );
    }
}

fn memoria(args: &[&str]) -> std::process::Output {
    crate::bin::command()
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn memoria")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A preset shrunk by overrides, in the Q4_K_M mix: the file has the preset's head layout and
/// the mix's types, `memoria run` loads it and says what it loaded; bad flags are refused.
#[test]
fn synth_cli_writes_a_preset_that_runs() {
    let dir = std::env::temp_dir().join(format!("memoria-synth-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("qwen3-small.gguf");
    let p = path.to_str().expect("utf-8");
    let out = memoria(&[
        "model",
        "synth",
        p,
        "--preset",
        "qwen3-4b",
        "--layers",
        "3",
        "--dim",
        "512",
        "--ffn",
        "768",
        "--vocab-size",
        "1000",
        "--context",
        "4096",
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("qwen3") && err.contains("Q4_K ") && err.contains("Q6_K "),
        "{err}"
    );
    let f = GgufFile::open(&path).expect("synthetic file");
    assert_eq!(f.get_u32("qwen3.attention.key_length"), Some(128));
    assert_eq!(f.get_u32("qwen3.attention.head_count"), Some(32));
    assert_eq!(
        f.tensor("blk.0.attn_q.weight").expect("q").dims,
        [512, 4096]
    );
    assert_eq!(
        f.tensor("token_embd.weight").expect("embd").ty,
        GgmlType::Q6K
    );
    assert_eq!(
        f.tensor("blk.1.attn_v.weight").expect("v").ty,
        GgmlType::Q4K
    );
    assert!(f.tensor("output.weight").is_none());
    let out = memoria(&["run", "-m", p, "-p", "hello", "-n", "3", "--temp", "0"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("model: qwen3, ")
            && err.contains("context 4096 (trained 4096)")
            && err.contains("SIMD: "),
        "{err}"
    );
    for (args, says) in [
        (&["--preset", "qwen3-9b"][..], "qwen3-4b"),
        (&["--arch", "gpt-oss"][..], "--experts"),
        (&["--arch", "gemma2", "--untied"][..], "ties the output"),
        (&["--type", "q4_k_s"][..], "q4_k_m"),
    ] {
        let out = memoria(&[["model", "synth", p].as_slice(), args].concat());
        let err = text(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
