//! agent: a multi-turn assistant whose conversation outlives the request. Each request restores
//! the session saved as `agent-{conversation}` in this namespace (or starts one), adds the
//! user's turn, answers, and saves the session again under the same name.
//! `POST {"conversation": "id", "message": "..."}` answers
//! `{"reply": "...", "restored": bool, "context_tokens": N, "cached_tokens": N}`.

use memoria_guest::http::{self, IncomingRequest, ResponseOutparam};
use memoria_guest::{Params, Session};
use serde::Deserialize;
use serde_json::json;

const SYSTEM: &str = "Once upon a time, a wise old owl helped the animals of the forest.\n";

#[derive(Deserialize)]
struct Turn {
    conversation: String,
    message: String,
}

struct Agent;

fn turn(t: &Turn) -> memoria_guest::Result<serde_json::Value> {
    let name = format!("agent-{}", t.conversation);
    let (session, restored) = Session::builder()
        .restore_or_new(&name)
        .prefix(SYSTEM)
        .open()?;
    session.append(&format!("Friend: {}\nOwl:", t.message))?;
    let g = session.generate(&Params::new(20).stop("\n"))?;
    session.append("\n")?;
    session.save(&name)?;
    Ok(json!({
        "reply": g.text.trim(),
        "restored": restored,
        "context_tokens": session.len()?,
        "cached_tokens": g.usage.cached_tokens,
    }))
}

impl http::Handler for Agent {
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let t: Turn = match http::read_body(&req)
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        {
            Ok(t) => t,
            Err(e) => {
                return http::error(
                    out,
                    400,
                    &format!("expected {{\"conversation\": \"id\", \"message\": \"...\"}}: {e}"),
                );
            }
        };
        match turn(&t) {
            Ok(body) => http::respond(out, 200, "application/json", body.to_string().as_bytes()),
            Err(e) => http::error(out, e.status(), &e.to_string()),
        }
    }
}

http::export!(Agent);
