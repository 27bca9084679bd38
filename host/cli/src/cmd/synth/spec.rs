//! The model `memoria model synth` writes, from its flags: a preset (or the defaults) with each
//! flag given replacing one value.

use anyhow::{Context, bail};
use memoria_kernels::GgmlType;
use memoria_model::synth::presets::{default_types, preset, preset_names};
use memoria_model::synth::{Arch, SynthMoe, SynthSpec, SynthVocab, WeightTypes};

use super::SynthArgs;

/// Parses `--type`: `q4_k_m` or any weight type memoria implements (not the activation-only
/// q8_1 / q8_k).
fn parse_types(name: &str) -> anyhow::Result<WeightTypes> {
    WeightTypes::parse(name).with_context(|| {
        format!(
            "--type {name:?}: use q4_k_m or one of {}",
            weight_type_names()
        )
    })
}

/// The single weight types accepted, comma-separated.
fn weight_type_names() -> String {
    GgmlType::ALL
        .into_iter()
        .filter(|t| !t.is_activation_only())
        .map(GgmlType::name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The spec without a preset: a 768-wide, 12-layer model of `arch`.
fn defaults(arch: Arch, ty: WeightTypes) -> SynthSpec {
    SynthSpec {
        arch,
        dim: 768,
        layers: 12,
        heads: 12,
        kv_heads: 12,
        head_dim: None,
        ffn: 2048,
        moe: None,
        window: None,
        vocab: SynthVocab::Size(512),
        ty,
        context: 2048,
        seed: 1,
        rope_base: 10000.0,
        tied_embeddings: arch.default_tied(),
    }
}

/// The spec the flags ask for.
pub(super) fn resolve(a: &SynthArgs) -> anyhow::Result<SynthSpec> {
    let arch = a
        .arch
        .as_deref()
        .map(|name| {
            Arch::parse(name)
                .with_context(|| format!("--arch {name:?}: use one of {}", Arch::names()))
        })
        .transpose()?;
    let ty = a.ty.as_deref().map(parse_types).transpose()?;
    let mut spec = match &a.preset {
        Some(name) => {
            let spec = preset(name, ty.unwrap_or(default_types(name)))
                .with_context(|| format!("--preset {name:?}: use one of {}", preset_names()))?;
            if let Some(arch) = arch.filter(|&x| x != spec.arch) {
                bail!(
                    "--preset {name} is a {} model, not {}",
                    spec.arch.name(),
                    arch.name()
                );
            }
            spec
        }
        None => defaults(
            arch.unwrap_or(Arch::Llama),
            ty.unwrap_or(WeightTypes::Single(GgmlType::Q8_0)),
        ),
    };
    let from_preset = a.preset.is_some();
    if let Some(v) = a.dim {
        spec.dim = v;
    }
    if let Some(v) = a.layers {
        spec.layers = v;
    }
    if let Some(v) = a.heads {
        spec.heads = v;
        if !from_preset {
            spec.kv_heads = v;
        }
    }
    if let Some(v) = a.kv_heads {
        spec.kv_heads = v;
    }
    if a.head_dim.is_some() {
        spec.head_dim = a.head_dim;
    }
    if let Some(v) = a.ffn {
        spec.ffn = v;
    }
    spec.moe = experts(a, &spec)?;
    if a.window.is_some() {
        spec.window = a.window;
    }
    match (&a.vocab_from, a.vocab_size) {
        (Some(p), None) => spec.vocab = SynthVocab::FromFile(p.clone()),
        (None, Some(n)) => spec.vocab = SynthVocab::Size(n),
        (None, None) => {}
        (Some(_), Some(_)) => bail!("give --vocab-from or --vocab-size, not both"),
    }
    if let Some(v) = a.context {
        spec.context = v;
    }
    if let Some(v) = a.rope_base {
        spec.rope_base = v;
    }
    if a.tied || a.untied {
        spec.tied_embeddings = a.tied;
    }
    if let Some(v) = a.seed {
        spec.seed = v;
    }
    Ok(spec)
}

/// The experts: the preset's with the flags given replacing values, or all three flags for a
/// MoE architecture without a preset; none for a dense one.
fn experts(a: &SynthArgs, spec: &SynthSpec) -> anyhow::Result<Option<SynthMoe>> {
    let given = [a.experts, a.experts_used, a.expert_ffn];
    if !spec.arch.is_moe() {
        if given.iter().any(Option::is_some) {
            bail!(
                "--experts, --experts-used and --expert-ffn apply to qwen3moe and gpt-oss, not {}",
                spec.arch.name()
            );
        }
        return Ok(None);
    }
    let base = spec.moe;
    let pick = |flag: Option<usize>, from: Option<usize>, name: &str| {
        flag.or(from)
            .with_context(|| format!("{} needs --{name} (or a preset)", spec.arch.name()))
    };
    Ok(Some(SynthMoe {
        experts: pick(a.experts, base.map(|m| m.experts), "experts")?,
        used: pick(a.experts_used, base.map(|m| m.used), "experts-used")?,
        ffn: pick(a.expert_ffn, base.map(|m| m.ffn), "expert-ffn")?,
    }))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: SynthArgs,
    }

    fn spec(args: &[&str]) -> anyhow::Result<SynthSpec> {
        let cli = Cli::try_parse_from(["synth", "out.gguf"].iter().chain(args))?;
        resolve(&cli.a)
    }

    #[test]
    fn type_accepts_q4_k_m_and_every_weight_type() {
        for t in GgmlType::ALL {
            assert_eq!(
                parse_types(t.name()).ok(),
                (!t.is_activation_only()).then_some(WeightTypes::Single(t)),
                "{t}"
            );
        }
        assert_eq!(parse_types("Q4_K_M").unwrap(), WeightTypes::Q4KM);
        let err = parse_types("q8_1").unwrap_err().to_string();
        assert!(
            err.contains("q4_k_m") && err.contains("q4_1") && !err.contains("q8_k"),
            "{err}"
        );
    }

    #[test]
    fn presets_with_overrides() {
        let s = spec(&["--preset", "qwen3-30b-a3b", "--layers", "24"]).unwrap();
        assert_eq!(
            (s.arch, s.layers, s.ty),
            (Arch::Qwen3Moe, 24, WeightTypes::Q4KM)
        );
        assert_eq!(
            s.moe.map(|m| (m.experts, m.used, m.ffn)),
            Some((128, 8, 768))
        );
        let s = spec(&["--preset", "qwen3-4b", "--type", "q8_0", "--heads", "16"]).unwrap();
        assert_eq!((s.heads, s.kv_heads), (16, 8));
        assert_eq!(s.ty, WeightTypes::Single(GgmlType::Q8_0));
        let err = spec(&["--preset", "qwen3-4b", "--arch", "llama"]).unwrap_err();
        assert!(err.to_string().contains("qwen3 model"), "{err}");
        let err = spec(&["--preset", "nope"]).unwrap_err();
        assert!(err.to_string().contains("gemma2-2b"), "{err}");
    }

    #[test]
    fn gpt_oss_ships_in_mxfp4() {
        let s = spec(&["--preset", "gpt-oss-20b"]).unwrap();
        assert_eq!((s.arch, s.ty), (Arch::GptOss, WeightTypes::Mxfp4Moe));
        let s = spec(&["--preset", "gpt-oss-20b", "--type", "q4_k_m"]).unwrap();
        assert_eq!(s.ty, WeightTypes::Q4KM);
    }

    #[test]
    fn defaults_and_architecture_rules() {
        let s = spec(&["--heads", "4"]).unwrap();
        assert_eq!(
            (s.arch, s.dim, s.heads, s.kv_heads),
            (Arch::Llama, 768, 4, 4)
        );
        assert!(s.tied_embeddings);
        assert!(!spec(&["--arch", "olmo2"]).unwrap().tied_embeddings);
        assert!(!spec(&["--untied"]).unwrap().tied_embeddings);
        let err = spec(&["--arch", "gpt-oss"]).unwrap_err().to_string();
        assert!(err.contains("--experts"), "{err}");
        let s = spec(&[
            "--arch",
            "gpt-oss",
            "--experts",
            "8",
            "--experts-used",
            "2",
            "--expert-ffn",
            "256",
        ]);
        assert_eq!(
            s.unwrap().moe,
            Some(SynthMoe {
                experts: 8,
                used: 2,
                ffn: 256
            })
        );
        assert!(spec(&["--experts", "8"]).is_err());
        assert!(
            spec(&["--arch", "mamba"])
                .unwrap_err()
                .to_string()
                .contains("gpt-oss")
        );
    }
}
