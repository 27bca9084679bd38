//! SmolLM2-135M-Instruct's real vocabulary, read from the models folder (`$MEMORIA_MODELS`,
//! default `~/.cache/memoria/models`, where `memoria pull` puts it). Missing is a failure.

use std::path::PathBuf;

use memoria_model::gguf::GgufFile;
use memoria_model::tokenizer::Tokenizer;

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The tokenizer, each token's bytes (empty for control tokens) and the end-of-generation ids.
pub fn smollm2() -> (Tokenizer, Vec<Vec<u8>>, Vec<u32>) {
    let dir = std::env::var_os("MEMORIA_MODELS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/memoria/models"))
        })
        .expect("neither MEMORIA_MODELS nor HOME is set: cannot find the models folder");
    let path = dir.join(SMOLLM2);
    assert!(
        path.is_file(),
        "real model missing: {} (run `memoria pull smollm2-135m-instruct`, or set MEMORIA_MODELS \
         to the folder holding {SMOLLM2})",
        path.display()
    );
    let f = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tok = Tokenizer::from_gguf(&f).expect("tokenizer");
    let pieces = (0..tok.n_vocab() as u32)
        .map(|id| tok.token_to_piece(id, false))
        .collect();
    let eog = tok.eog_ids().to_vec();
    (tok, pieces, eog)
}

/// The nested schema of the benchmark: an object with a nested object, an array of objects, an
/// enum and numbers.
pub const NESTED_SCHEMA: &str = r#"{"type":"object","properties":{
    "name":{"type":"string"},
    "age":{"type":"integer"},
    "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
        "zip":{"type":["string","null"]}},"required":["street","city","zip"],"additionalProperties":false},
    "orders":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},
        "total":{"type":"number"},"status":{"enum":["pending","shipped","delivered"]}},
        "required":["id","total","status"],"additionalProperties":false},"maxItems":8},
    "score":{"type":"number"},
    "tier":{"enum":["free","pro","enterprise"]}},
  "required":["name","age","address","orders","score","tier"],"additionalProperties":false}"#;

/// A valid instance of [`NESTED_SCHEMA`] under the output policy.
pub const NESTED_INSTANCE: &str = r#"{"name": "Ada Lovelace", "age": 36, "address": {"street": "12 St James's Square", "city": "London", "zip": null}, "orders": [{"id": 1, "total": 12.5, "status": "shipped"}, {"id": 2, "total": 3, "status": "pending"}], "score": 0.97, "tier": "pro"}"#;
