//! chat: a tenant component answering `POST {"message": "..."}` with
//! `{"reply": "...", "prompt_tokens": N, "cached_tokens": N}`. Every session starts with the
//! same fixed system prompt, so its K/V blocks are shared by every request of the namespace
//! (and of its isolation group). With `"stream": true` the reply is streamed as NDJSON lines
//! `{"token": "..."}` followed by the summary object.

use memoria_guest::http::{self, IncomingRequest, ResponseOutparam};
use memoria_guest::{Params, Session};
use serde::Deserialize;
use serde_json::json;

/// The shared prefix: long enough to fill several K/V blocks.
const SYSTEM: &str = "Once upon a time, there was a kind little robot who lived in a big house. \
The robot liked to help everyone and answered every question with a short happy story.\n";

#[derive(Deserialize)]
struct Ask {
    message: String,
    #[serde(default)]
    stream: bool,
    #[serde(default = "default_max")]
    max_tokens: u32,
}

fn default_max() -> u32 {
    24
}

struct Chat;

impl http::Handler for Chat {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let ask: Ask = match http::read_body(&req)
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(a) => a,
            Err(e) => {
                return http::error(out, 400, &format!("expected {{\"message\": \"...\"}}: {e}"));
            }
        };
        let session = match Session::builder().prefix(SYSTEM).open() {
            Ok((s, _)) => s,
            Err(e) => return http::error(out, e.status(), &e.to_string()),
        };
        if let Err(e) = session.append(&format!("Question: {}\nAnswer:", ask.message)) {
            return http::error(out, e.status(), &e.to_string());
        }
        let params = Params::new(ask.max_tokens).stop("\n");
        if ask.stream {
            stream_reply(&session, &params, out);
        } else {
            match session.generate(&params) {
                Ok(g) => {
                    let body = json!({
                        "reply": g.text.trim(),
                        "prompt_tokens": g.usage.prompt_tokens,
                        "cached_tokens": g.usage.cached_tokens,
                    });
                    http::respond(out, 200, "application/json", body.to_string().as_bytes());
                }
                Err(e) => http::error(out, e.status(), &e.to_string()),
            }
        }
    }
}

fn stream_reply(session: &Session, params: &Params, out: ResponseOutparam) {
    let mut tokens = match session.stream(params) {
        Ok(t) => t,
        Err(e) => return http::error(out, e.status(), &e.to_string()),
    };
    let mut w = http::start(out, 200, "application/x-ndjson");
    let mut reply = String::new();
    for t in tokens.by_ref() {
        match t {
            Ok(t) => {
                reply.push_str(&t.text);
                let _ = w.write(format!("{}\n", json!({ "token": t.text })).as_bytes());
            }
            Err(e) => {
                let _ = w.write(format!("{}\n", json!({ "error": e.to_string() })).as_bytes());
                return w.finish();
            }
        }
    }
    if let Some((tail, _, usage)) = tokens.finish() {
        reply.push_str(tail);
        let summary = json!({
            "reply": reply.trim(),
            "prompt_tokens": usage.prompt_tokens,
            "cached_tokens": usage.cached_tokens,
        });
        let _ = w.write(format!("{summary}\n").as_bytes());
    }
    w.finish();
}

http::export!(Chat);
