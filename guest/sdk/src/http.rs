//! Small wasi:http helpers for handlers: read a request body, answer with a whole body, or
//! stream a body chunk by chunk. Re-exports `wasip2`'s handler types and export macro.

use std::io::{Read, Write};

pub use wasip2::exports::http::incoming_handler::Guest as Handler;
pub use wasip2::http::proxy::export;
use wasip2::http::types::{Fields, OutgoingBody, OutgoingResponse};
pub use wasip2::http::types::{IncomingRequest, Method, ResponseOutparam};
use wasip2::io::streams::OutputStream;

/// Largest request body [`read_body`] accepts.
pub const MAX_BODY: usize = 1 << 20;

/// The request's path and query.
pub fn path(req: &IncomingRequest) -> String {
    req.path_with_query().unwrap_or_default()
}

/// The whole request body (at most [`MAX_BODY`] bytes).
pub fn read_body(req: &IncomingRequest) -> Result<Vec<u8>, String> {
    let body = req
        .consume()
        .map_err(|()| "request body already consumed".to_string())?;
    let mut out = Vec::new();
    {
        let stream = body
            .stream()
            .map_err(|()| "request body stream unavailable".to_string())?;
        let mut limited = stream.take(MAX_BODY as u64 + 1);
        limited
            .read_to_end(&mut out)
            .map_err(|e| format!("reading the request body: {e}"))?;
    }
    if out.len() > MAX_BODY {
        return Err(format!("request body larger than {MAX_BODY} bytes"));
    }
    Ok(out)
}

/// A response being streamed; call [`BodyWriter::finish`] at the end.
pub struct BodyWriter {
    stream: Option<OutputStream>,
    body: Option<OutgoingBody>,
}

impl BodyWriter {
    /// Writes and flushes `bytes` (the client sees them now).
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self.stream.as_mut() {
            Some(s) => {
                s.write_all(bytes)?;
                s.flush()
            }
            None => Ok(()),
        }
    }

    /// Ends the body.
    pub fn finish(mut self) {
        self.stream.take();
        if let Some(body) = self.body.take() {
            let _ = OutgoingBody::finish(body, None);
        }
    }
}

/// Sends the status line and headers; the body follows through the returned writer.
pub fn start(out: ResponseOutparam, status: u16, content_type: &str) -> BodyWriter {
    let headers =
        Fields::from_list(&[("content-type".to_string(), content_type.as_bytes().to_vec())])
            .unwrap_or_else(|_| Fields::new());
    let resp = OutgoingResponse::new(headers);
    let _ = resp.set_status_code(status);
    let body = resp.body().ok();
    ResponseOutparam::set(out, Ok(resp));
    let stream = body.as_ref().and_then(|b| b.write().ok());
    BodyWriter { stream, body }
}

/// Sends a whole response.
pub fn respond(out: ResponseOutparam, status: u16, content_type: &str, body: &[u8]) {
    let mut w = start(out, status, content_type);
    let _ = w.write(body);
    w.finish();
}

/// Sends `{"error": message}` with `status`.
pub fn error(out: ResponseOutparam, status: u16, message: &str) {
    let escaped: String = message
        .chars()
        .flat_map(|c| match c {
            '"' => "\\\"".chars().collect::<Vec<_>>(),
            '\\' => "\\\\".chars().collect(),
            c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32).chars().collect(),
            c => vec![c],
        })
        .collect();
    respond(
        out,
        status,
        "application/json",
        format!("{{\"error\":\"{escaped}\"}}").as_bytes(),
    );
}
