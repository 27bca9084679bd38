//! `memoria inspect`: a GGUF file's header, metadata (long arrays abbreviated) and tensor table.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use memoria_model::gguf::{GgufFile, MetaValue};

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// GGUF file.
    file: PathBuf,
}

pub fn main(a: InspectArgs) -> anyhow::Result<()> {
    let f = GgufFile::open(&a.file).with_context(|| format!("opening {}", a.file.display()))?;
    println!("file:      {}", a.file.display());
    println!("size:      {} bytes", f.file_size());
    println!("version:   GGUF v{}", f.version());
    println!("alignment: {}", f.alignment());
    println!("metadata:  {} keys", f.metadata().len());
    for (key, value) in f.metadata() {
        println!("  {key:<48} {}", summarize(value));
    }
    let total: u64 = f.tensors().iter().map(|t| t.size).sum();
    println!("tensors:   {} ({} bytes)", f.tensors().len(), total);
    for t in f.tensors() {
        let dims: Vec<String> = t.dims.iter().map(|d| d.to_string()).collect();
        println!(
            "  {:<32} {:<6} [{}] {} bytes @ {}",
            t.name,
            t.ty.name(),
            dims.join(", "),
            t.size,
            t.offset
        );
    }
    Ok(())
}

/// One line for a metadata value: scalars in full, strings and arrays shortened.
fn summarize(v: &MetaValue) -> String {
    let s = v.to_string();
    if s.chars().count() > 100 {
        let head: String = s.chars().take(97).collect();
        format!("{head}...")
    } else {
        s
    }
}
