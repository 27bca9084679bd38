//! Loading a model for a CLI command: map and validate the file, then touch every page of the
//! weights read in place (not those with an interleaved copy) so timings do not include page
//! faults, with an indicatif progress bar on a terminal (none
//! when `quiet`, e.g. with `--json`).

use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;

/// A model with its tokenizer and how long loading took.
pub struct Loaded {
    pub model: Model,
    pub tokenizer: Tokenizer,
    pub load_ms: f64,
}

/// Loads `path`, showing progress unless `quiet` or stderr is not a terminal.
pub fn load_model(path: &Path, quiet: bool) -> anyhow::Result<Loaded> {
    let started = Instant::now();
    let model = Model::load(path).with_context(|| format!("loading model {}", path.display()))?;
    let tokenizer = Tokenizer::from_gguf(model.gguf())
        .with_context(|| format!("reading the tokenizer of {}", path.display()))?;
    let tensors = model.tensors_read_in_place();
    let bar = if quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(tensors.iter().map(|t| t.size).sum())
    };
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(format!("loading {}", path.display()));
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
