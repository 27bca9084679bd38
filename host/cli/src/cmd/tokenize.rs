//! `memoria tokenize`: text to token ids with a model's tokenizer; works on vocab-only GGUF files
//! (no weights needed), like llama.cpp's `llama-tokenize`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use memoria_model::gguf::GgufFile;
use memoria_model::tokenizer::Tokenizer;

#[derive(Debug, Args)]
pub struct TokenizeArgs {
    /// GGUF model or vocab-only file.
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Do not add the BOS/EOS tokens the metadata asks for.
    #[arg(long)]
    no_bos: bool,
    /// Treat special-token text such as `<s>` as plain text.
    #[arg(long)]
    no_parse_special: bool,
    /// Print a JSON array of ids.
    #[arg(long)]
    json: bool,
    /// Read the text from a file.
    #[arg(long, conflicts_with = "text")]
    file: Option<PathBuf>,
    /// The text.
    text: Option<String>,
}

pub fn main(a: TokenizeArgs) -> anyhow::Result<()> {
    let text = match (&a.text, &a.file) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        }
        (None, None) => anyhow::bail!("give TEXT or --file PATH"),
    };
    let file =
        GgufFile::open(&a.model).with_context(|| format!("opening {}", a.model.display()))?;
    let tok = Tokenizer::from_gguf(&file).context("reading the tokenizer")?;
    let ids = tok.encode(&text, !a.no_bos, !a.no_parse_special);
    if a.json {
        println!("{}", serde_json::to_string(&ids)?);
    } else {
        for id in ids {
            let piece = tok.token_to_piece(id, true);
            println!("{id:6} -> '{}'", String::from_utf8_lossy(&piece));
        }
    }
    Ok(())
}
