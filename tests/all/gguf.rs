//! Integration tests: gguf. Reading llama.cpp's own files (stories260K, vocab-only GGUFs),
//! writer→reader round trips byte for byte, synthetic models, and malformed inputs derived
//! from a real file.

use memoria_kernels::GgmlType;
use memoria_model::gguf::{GgufFile, GgufWriter, MetaValue};
use memoria_model::synth::{Arch, SynthSpec, SynthVocab, synthesize, write_synth};
use proptest::prelude::*;

use crate::shared;

fn stories(ty: &str) -> GgufFile {
    GgufFile::open(shared::path(&format!("models/stories260K-{ty}.gguf"))).unwrap()
}

/// Copies every key and tensor of `f` into a writer, in file order.
pub(crate) fn rewrite(f: &GgufFile) -> GgufWriter {
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata() {
        w.set(k, v.clone());
    }
    for t in f.tensors() {
        w.add_tensor(&t.name, &t.dims, t.ty, f.tensor_data(t).to_vec())
            .unwrap();
    }
    w
}

#[test]
fn gguf_reads_stories260k_f32() {
    let f = stories("f32");
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.get_str("general.architecture"), Some("llama"));
    assert_eq!(f.get_str("tokenizer.ggml.model"), Some("llama"));
    assert_eq!(f.get_u32("llama.embedding_length"), Some(64));
    assert_eq!(f.get_u32("llama.block_count"), Some(5));
    assert_eq!(f.get_u32("llama.attention.head_count"), Some(8));
    assert_eq!(f.get_u32("llama.attention.head_count_kv"), Some(4));
    assert_eq!(f.get_u32("llama.context_length"), Some(512));
    assert_eq!(f.get_f32("llama.rope.freq_base"), Some(10000.0));
    assert_eq!(
        f.get_f32("llama.attention.layer_norm_rms_epsilon"),
        Some(1e-5)
    );
    assert_eq!(f.get_bool("tokenizer.ggml.add_bos_token"), Some(true));
    assert_eq!(f.get_u32("tokenizer.ggml.bos_token_id"), Some(1));
    let tokens = f
        .get_array("tokenizer.ggml.tokens")
        .unwrap()
        .as_strings()
        .unwrap();
    assert_eq!(tokens.len(), 512);
    assert_eq!(&tokens[..3], ["<unk>", "<s>", "</s>"]);
    assert_eq!(
        f.get_array("tokenizer.ggml.scores")
            .unwrap()
            .as_f32()
            .unwrap()
            .len(),
        512
    );
    assert_eq!(
        f.get_array("tokenizer.ggml.token_type")
            .unwrap()
            .as_i32()
            .unwrap()[..3],
        [2, 3, 3]
    );
    assert_eq!(f.metadata()[0].0, "general.architecture");

    assert_eq!(f.tensors().len(), 2 + 5 * 9);
    let emb = f.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (emb.dims.as_slice(), emb.ty, emb.size),
        (&[64u64, 512][..], GgmlType::F32, 64 * 512 * 4)
    );
    assert_eq!(
        (emb.cols(), emb.rows(), emb.n_elements()),
        (64, 512, 64 * 512)
    );
    assert_eq!(f.tensor("blk.4.ffn_down.weight").unwrap().dims, [172, 64]);
    assert_eq!(f.tensor("blk.0.attn_k.weight").unwrap().dims, [64, 32]);
    assert!(f.tensor("output.weight").is_none());
    let data = f.tensor_data(emb);
    assert_eq!(data.len() as u64, emb.size);
    assert!(
        data.as_chunks::<4>()
            .0
            .iter()
            .all(|&c| f32::from_le_bytes(c).is_finite())
    );
    let last = f.tensors().iter().map(|t| t.offset + t.size).max().unwrap();
    assert_eq!(last, f.file_size());
}

#[test]
fn gguf_reads_stories260k_f16() {
    let f = stories("f16");
    assert_eq!(f.get_u32("general.file_type"), Some(1));
    assert_eq!(f.tensor("blk.0.attn_q.weight").unwrap().ty, GgmlType::F16);
    assert_eq!(
        f.tensor("blk.0.attn_norm.weight").unwrap().ty,
        GgmlType::F32
    );
}

#[test]
fn gguf_reads_vocab_only_files() {
    let spm = GgufFile::open(shared::path("vocab/ggml-vocab-llama-spm.gguf")).unwrap();
    assert!(spm.tensors().is_empty());
    assert_eq!(spm.get_array("tokenizer.ggml.tokens").unwrap().len(), 32000);
    assert_eq!(spm.get_str("tokenizer.ggml.pre"), Some("default"));
    assert_eq!(spm.get_u32("llama.vocab_size"), Some(32000));
    let gpt2 = GgufFile::open(shared::path("vocab/ggml-vocab-gpt-2.gguf")).unwrap();
    assert_eq!(gpt2.get_str("tokenizer.ggml.model"), Some("gpt2"));
    assert_eq!(
        gpt2.get_array("tokenizer.ggml.tokens").unwrap().len(),
        50257
    );
    let merges = gpt2
        .get_array("tokenizer.ggml.merges")
        .unwrap()
        .as_strings()
        .unwrap();
    assert_eq!((merges.len(), merges[0].as_str()), (50000, "Ġ t"));
    assert_eq!(gpt2.get_u32("tokenizer.ggml.eos_token_id"), Some(50256));
    for name in ["ggml-vocab-phi-3.gguf", "ggml-vocab-starcoder.gguf"] {
        let f = GgufFile::open(shared::path(&format!("vocab-extra/{name}"))).unwrap();
        assert!(
            f.get_array("tokenizer.ggml.tokens").unwrap().len() > 1000,
            "{name}"
        );
    }
}

#[test]
fn gguf_rewrite_of_llama_cpp_files_is_byte_identical() {
    for rel in [
        "models/stories260K-f32.gguf",
        "models/stories260K-f16.gguf",
        "vocab/ggml-vocab-llama-spm.gguf",
    ] {
        let path = shared::path(rel);
        let f = GgufFile::open(&path).unwrap();
        let bytes = rewrite(&f).to_bytes();
        assert!(
            bytes == std::fs::read(&path).unwrap(),
            "{rel}: rewrite differs from the original"
        );
    }
}

#[test]
fn gguf_every_header_prefix_of_stories_is_an_error() {
    let bytes = std::fs::read(shared::path("models/stories260K-f32.gguf")).unwrap();
    let data_offset = stories("f32").data_offset() as usize;
    for len in (0..data_offset + 64).chain([bytes.len() - 1]) {
        assert!(
            GgufFile::from_bytes(bytes[..len].to_vec()).is_err(),
            "prefix {len} accepted"
        );
    }
}

/// A real file whose embedding is patched to a type nobody computes with (16, iq2_xxs): it
/// still opens, lists the tensor apart, and loading the model names the tensor and its type.
#[test]
fn gguf_unknown_tensor_type_in_real_file_opens_and_model_load_names_it() {
    let f = stories("f32");
    let mut w = rewrite(&f);
    w.set("general.name", MetaValue::String("patched".into()));
    let mut bytes = w.to_bytes();
    // The first tensor info's type id follows its name, n_dims and two dims.
    let name = b"token_embd.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len() + 4 + 16;
    assert_eq!(bytes[at..at + 4], 0u32.to_le_bytes());
    bytes[at..at + 4].copy_from_slice(&16u32.to_le_bytes());
    let patched = GgufFile::from_bytes(bytes).expect("metadata parses, so the file opens");
    assert_eq!(patched.get_str("general.name"), Some("patched"));
    assert_eq!(patched.tensors().len(), f.tensors().len() - 1);
    let u = patched.unsupported_tensors();
    assert_eq!(u.len(), 1);
    assert_eq!(
        (u[0].name.as_str(), u[0].type_id),
        ("token_embd.weight", 16)
    );
    assert_eq!(u[0].dims, f.tensor("token_embd.weight").unwrap().dims);
    // The tokenizer needs no tensors.
    memoria_model::tokenizer::Tokenizer::from_gguf(&patched).unwrap();
    let msg = memoria_model::llama::Model::from_gguf(patched)
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        format!(
            "tensor 'token_embd.weight': type 16 ({}) is not supported",
            GgmlType::name_of_id(16)
        )
    );
}

#[test]
fn gguf_synth_with_vocab_file_copies_tokenizer_and_maps_from_disk() {
    let vocab = shared::path("vocab/ggml-vocab-llama-spm.gguf");
    let mut spec = SynthSpec::tiny(Arch::Llama, GgmlType::Q8_0);
    spec.vocab = SynthVocab::FromFile(vocab.clone());
    let dir = std::env::temp_dir().join(format!("memoria-gguf-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("synth.gguf");
    write_synth(&spec, &path).unwrap();
    let f = GgufFile::open(&path).unwrap();
    let src = GgufFile::open(&vocab).unwrap();
    for (k, v) in src
        .metadata()
        .iter()
        .filter(|(k, _)| k.starts_with("tokenizer."))
    {
        assert_eq!(f.get(k), Some(v), "{k}");
    }
    assert_eq!(f.get_u32("llama.vocab_size"), Some(32000));
    assert_eq!(f.tensor("token_embd.weight").unwrap().dims, [256, 32000]);
    assert_eq!(f.tensor("output.weight").unwrap().ty, GgmlType::Q8_0);
    assert_eq!(
        synthesize(&spec).unwrap().to_bytes(),
        std::fs::read(&path).unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Mutations of the metadata and tensor-info region of a real file never panic.
    #[test]
    fn gguf_mutated_stories_header_never_panics(
        edits in prop::collection::vec((0usize..14208, any::<u8>()), 1..6),
    ) {
        let mut bytes = std::fs::read(shared::path("models/stories260K-f32.gguf")).unwrap();
        for (at, byte) in edits {
            bytes[at] = byte;
        }
        if let Ok(f) = GgufFile::from_bytes(bytes) {
            for t in f.tensors() {
                prop_assert_eq!(f.tensor_data(t).len() as u64, t.size);
            }
        }
    }
}

#[test]
fn gguf_synth_models_load_in_the_llama_loader() {
    for arch in [Arch::Llama, Arch::Qwen2] {
        for ty in [GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4K] {
            let mut spec = SynthSpec::tiny(arch, ty);
            spec.tied_embeddings = arch == Arch::Qwen2;
            let f = GgufFile::from_bytes(synthesize(&spec).unwrap().to_bytes()).unwrap();
            let model = memoria_model::llama::Model::from_gguf(f)
                .unwrap_or_else(|e| panic!("{arch:?} {ty}: {e}"));
            assert_eq!(model.hparams().kv_dim(), 128);
        }
    }
}
