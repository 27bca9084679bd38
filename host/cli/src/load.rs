//! Loading a model for a CLI command: map and validate the file (with a progress bar over the
//! interleaved copies the kernels make of large matrices, the slow part for a big model), then
//! touch every page of the weights read in place (not those with an interleaved copy) so
//! timings do not include page faults; bars are drawn on a terminal only (none when `quiet`,
//! e.g. with `--json`). Also the summary `serve` and `run` print of what they loaded.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use memoria_kernels::GgmlType;
use memoria_kernels::matmul::Interleaved;
use memoria_kernels::simd::{self, SimdLevel};
use memoria_model::gguf::GgufFile;
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;

/// A model with its tokenizer and how long loading took.
pub struct Loaded {
    pub model: Model,
    pub tokenizer: Tokenizer,
    pub load_ms: f64,
}

/// A byte bar with `msg`, hidden when `quiet` or stderr is not a terminal.
fn bytes_bar(total: u64, msg: String, quiet: bool) -> ProgressBar {
    let bar = if quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(msg);
    bar
}

/// Bytes of the matrices the kernels may copy into their interleaved layout: quantized
/// matrices (experts included), the embedding only when it is also the output.
fn interleave_bytes(f: &GgufFile) -> u64 {
    if !Interleaved::in_use() {
        return 0;
    }
    let tied = f.tensor("output.weight").is_none();
    f.tensors()
        .iter()
        .filter(|t| t.dims.len() >= 2 && t.dims[1] > 1 && Interleaved::covers(t.ty))
        .filter(|t| tied || t.name != "token_embd.weight")
        .map(|t| t.size)
        .sum()
}

/// Loads `path`, showing progress unless `quiet` or stderr is not a terminal.
pub fn load_model(path: &Path, quiet: bool) -> anyhow::Result<Loaded> {
    let started = Instant::now();
    let context = || format!("loading model {}", path.display());
    let mut file = GgufFile::open(path).with_context(context)?;
    let copies = bytes_bar(
        interleave_bytes(&file),
        format!("interleaving {}", path.display()),
        quiet,
    );
    let seen = copies.clone();
    file.on_release(move |n| seen.inc(n));
    let model = Model::from_gguf(file).with_context(context);
    copies.finish_and_clear();
    let model = model?;
    let tokenizer = Tokenizer::from_gguf(model.gguf())
        .with_context(|| format!("reading the tokenizer of {}", path.display()))?;
    let tensors = model.tensors_read_in_place();
    let bar = bytes_bar(
        tensors.iter().map(|t| t.size).sum(),
        format!("loading {}", path.display()),
        quiet,
    );
    let mut checksum = 0u8;
    for t in tensors {
        let data = model.gguf().tensor_data(t);
        for page in data.chunks(4096) {
            checksum = checksum.wrapping_add(page[0]);
        }
        bar.inc(t.size);
    }
    std::hint::black_box(checksum);
    bar.finish_and_clear();
    Ok(Loaded {
        model,
        tokenizer,
        load_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// What a command serving `model` with sequences of up to `context` tokens tells the user it
/// loaded: architecture, parameters, type mix, experts, context, SIMD path and threads.
pub fn summary(model: &Model, context: usize) -> String {
    let f = model.gguf();
    let arch = f.get_str("general.architecture").unwrap_or("?");
    let params: u64 = f
        .tensors()
        .iter()
        .map(|t| t.dims.iter().product::<u64>())
        .sum();
    let experts = match (
        f.get_u32(&format!("{arch}.expert_count")),
        f.get_u32(&format!("{arch}.expert_used_count")),
    ) {
        (Some(n), Some(k)) => format!(", {n} experts ({k} per token)"),
        _ => String::new(),
    };
    let hp = model.hparams();
    format!(
        "model: {arch}, {} parameters ({}){experts}, {} layers; context {context} (trained {}); SIMD: {}; {} threads",
        human_count(params),
        type_mix(f.tensors().iter().map(|t| t.ty)),
        hp.n_layer,
        hp.n_ctx_train,
        simd_path(),
        memoria_kernels::threads::current_threads(),
    )
}

/// The kernels this process runs: scalar, or AVX2 with the VNNI tiles it uses and whether
/// matmuls read interleaved weight copies.
pub fn simd_path() -> String {
    match simd::level() {
        SimdLevel::Scalar => "scalar".into(),
        SimdLevel::Avx2 => {
            let tiles = if simd::avx512() {
                " + AVX-512 VNNI (512-bit int8 tiles)"
            } else if simd::vnni() {
                " + AVX-512 VNNI (256-bit int8 tiles)"
            } else {
                ""
            };
            let copies = if Interleaved::in_use() {
                ", interleaved weights"
            } else {
                ""
            };
            let amx = if simd::amx() {
                ", AMX tiles for matmuls of 8 tokens or more"
            } else {
                ""
            };
            format!("AVX2{tiles}{copies}{amx}")
        }
    }
}

/// Tensors per type, quantized types first (most tensors first), then the float types:
/// `Q4_K 168, Q6_K 29, F32 57`.
pub fn type_mix(types: impl IntoIterator<Item = GgmlType>) -> String {
    let mut counts: Vec<(GgmlType, usize)> = Vec::new();
    for ty in types {
        match counts.iter_mut().find(|(t, _)| *t == ty) {
            Some((_, n)) => *n += 1,
            None => counts.push((ty, 1)),
        }
    }
    let float = |t: GgmlType| matches!(t, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16);
    counts.sort_by_key(|&(t, n)| (float(t), std::cmp::Reverse(n), t.id()));
    counts
        .iter()
        .map(|(t, n)| format!("{} {n}", t.name().to_ascii_uppercase()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A count in thousands, millions or billions: `135.0M`, `1.72B`.
pub fn human_count(n: u64) -> String {
    let n = n as f64;
    match n {
        _ if n >= 1e9 => format!("{:.2}B", n / 1e9),
        _ if n >= 1e6 => format!("{:.1}M", n / 1e6),
        _ if n >= 1e3 => format!("{:.1}K", n / 1e3),
        _ => format!("{n}"),
    }
}

/// The chat template the model's file carries (`tokenizer.chat_template`), if it has one.
pub fn chat_template(loaded: &Loaded) -> Option<memoria_model::chat::ChatTemplate> {
    loaded.model.gguf().get_str("tokenizer.chat_template")?;
    memoria_model::chat::ChatTemplate::for_model(loaded.model.gguf(), &loaded.tokenizer, None).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_mix_puts_quantized_types_first() {
        let types = [
            GgmlType::F32,
            GgmlType::Q4K,
            GgmlType::Q6K,
            GgmlType::Q4K,
            GgmlType::F32,
        ];
        assert_eq!(type_mix(types), "Q4_K 2, Q6_K 1, F32 2");
        assert_eq!(type_mix([]), "");
    }

    /// The demo model's summary names what it is.
    #[test]
    fn summary_names_architecture_types_and_context() {
        let model = memoria_model::synth::demo::demo_model().unwrap();
        let s = summary(&model, 512);
        assert!(s.starts_with("model: llama, "), "{s}");
        assert!(s.contains("(F32 "), "{s}");
        assert!(
            s.contains("4 layers; context 512 (trained 2048); SIMD: "),
            "{s}"
        );
        assert!(s.ends_with(" threads"), "{s}");
        assert!(!simd_path().is_empty());
    }

    #[test]
    fn human_counts() {
        assert_eq!(human_count(1_720_574_976), "1.72B");
        assert_eq!(human_count(134_515_008), "134.5M");
        assert_eq!(human_count(260_000), "260.0K");
        assert_eq!(human_count(12), "12");
    }
}
