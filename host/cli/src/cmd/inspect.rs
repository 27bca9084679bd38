//! `memoria inspect`: a GGUF file's header, metadata (long arrays abbreviated) and tensor table,
//! tensors of types memoria does not compute with included (marked, their size unknown).

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
    let unsupported = f.unsupported_tensors();
    if unsupported.is_empty() {
        println!("tensors:   {} ({} bytes)", f.tensors().len(), total);
    } else {
        println!(
            "tensors:   {} ({} bytes in the {} of supported types; {} of types memoria does not \
             run: the file cannot be run as a model)",
            f.tensors().len() + unsupported.len(),
            total,
            f.tensors().len(),
            unsupported.len()
        );
    }
    // One table in data order, whatever the type.
    let mut rows: Vec<(u64, String)> = f
        .tensors()
        .iter()
        .map(|t| {
            let line = format!(
                "  {:<32} {:<6} [{}] {} bytes @ {}",
                t.name,
                t.ty.name(),
                dims(&t.dims),
                t.size,
                t.offset
            );
            (t.offset, line)
        })
        .chain(unsupported.iter().map(|t| {
            let line = format!(
                "  {:<32} {:<6} [{}] type {} not supported @ {}",
                t.name,
                t.type_name(),
                dims(&t.dims),
                t.type_id,
                t.offset
            );
            (t.offset, line)
        }))
        .collect();
    rows.sort_by_key(|r| r.0);
    for (_, line) in rows {
        println!("{line}");
    }
    Ok(())
}

fn dims(d: &[u64]) -> String {
    let parts: Vec<String> = d.iter().map(|x| x.to_string()).collect();
    parts.join(", ")
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
