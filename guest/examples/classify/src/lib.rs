//! classify: a few-shot sentiment classifier. The few-shot prompt is warmed and pinned in the
//! namespace's cache; each request opens it (its K/V come from the cache) and forks it once per
//! text, so every text is scored on its own branch without recomputing the examples.
//! `POST {"texts": ["..."]}` answers `{"labels": [...], "raw": [...], "cached_tokens": N}`.

use memoria_guest::http::{self, IncomingRequest, ResponseOutparam};
use memoria_guest::{Params, Session};
use serde::Deserialize;
use serde_json::json;

const FEW_SHOT: &str = "Decide if each sentence is happy or sad.\n\
Sentence: The dog found his ball and jumped with joy.\nLabel: happy\n\
Sentence: The girl lost her toy and cried all day.\nLabel: sad\n\
Sentence: They ate cake and laughed at the party.\nLabel: happy\n\
Sentence: The bird was cold and alone in the rain.\nLabel: sad\n";

const LABELS: [&str; 2] = ["happy", "sad"];

/// The pin lasts ten minutes after the last request that warmed it.
const PIN_TTL_MS: u64 = 600_000;

#[derive(Deserialize)]
struct Batch {
    texts: Vec<String>,
}

struct Classify;

fn label_of(raw: &str) -> &'static str {
    let r = raw.trim().to_ascii_lowercase();
    LABELS
        .iter()
        .copied()
        .find(|l| r.starts_with(l))
        .unwrap_or("unknown")
}

impl http::Handler for Classify {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let batch: Batch = match http::read_body(&req)
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(b) => b,
            Err(e) => {
                return http::error(out, 400, &format!("expected {{\"texts\": [\"...\"]}}: {e}"));
            }
        };
        let base = match Session::builder()
            .prefix(FEW_SHOT)
            .pin_prefix(Some(PIN_TTL_MS))
            .open()
        {
            Ok((s, _)) => s,
            Err(e) => return http::error(out, e.status(), &e.to_string()),
        };
        let (mut labels, mut raws, mut cached) = (Vec::new(), Vec::new(), 0);
        for text in &batch.texts {
            let run = || -> memoria_guest::Result<memoria_guest::Generation> {
                let branch = base.fork()?;
                branch.append(&format!("Sentence: {text}\nLabel:"))?;
                branch.generate(&Params::new(3).stop("\n"))
            };
            match run() {
                Ok(g) => {
                    cached += g.usage.cached_tokens;
                    labels.push(label_of(&g.text));
                    raws.push(g.text);
                }
                Err(e) => return http::error(out, e.status(), &e.to_string()),
            }
        }
        let body = json!({ "labels": labels, "raw": raws, "cached_tokens": cached });
        http::respond(out, 200, "application/json", body.to_string().as_bytes());
    }
}

http::export!(Classify);
