//! API errors in OpenAI's format: `{"error": {"message", "type", "param", "code"}}` with the
//! HTTP status that matches. Invariant: every non-2xx response the server itself produces goes
//! through [`ApiError`], so clients always get this shape (and 429s always carry Retry-After).

use http::{HeaderValue, StatusCode, header};
use serde_json::json;

use crate::body::{Response, json_response};

/// One failed request.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`, ...
    pub kind: &'static str,
    /// The request field at fault, when one is.
    pub param: Option<String>,
    pub code: Option<&'static str>,
    /// Seconds for `Retry-After` (429 and 503).
    pub retry_after: Option<u64>,
    /// A prompt longer than the context: `(n_prompt_tokens, n_ctx)`, in the body as
    /// llama-server has them.
    /// Boxed: the error travels in every `Result` of the handlers and stays small.
    pub exceeded: Option<Box<(usize, usize)>>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after: None,
            exceeded: None,
        }
    }

    /// 400: a request of `n_prompt` tokens (the prompt, with the completion when it must fit
    /// too) that does not fit a context of `n_ctx`. Type `exceed_context_size_error` with the
    /// two figures (llama-server's form), code `context_length_exceeded` (OpenAI's).
    pub fn context_exceeded(
        param: impl Into<String>,
        n_prompt: usize,
        n_ctx: usize,
        message: impl Into<String>,
    ) -> ApiError {
        let mut e = ApiError::invalid(param, message).with_code("context_length_exceeded");
        e.kind = "exceed_context_size_error";
        e.exceeded = Some(Box::new((n_prompt, n_ctx)));
        e
    }

    /// 400, naming the field at fault.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> ApiError {
        let mut e = ApiError::bad_request(message);
        e.param = Some(param.into());
        e
    }

    /// 400 without a field.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 401: no key or an unknown key.
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "authentication_error", message)
            .with_code("invalid_api_key")
    }

    /// 403: a valid key that may not do this.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "permission_error", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", message)
            .with_code("not_found")
    }

    /// 405.
    pub fn method_not_allowed(method: &http::Method, path: &str) -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            format!("method {method} is not allowed on {path}"),
        )
        .with_code("method_not_allowed")
    }

    /// 413.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
        .with_code("request_too_large")
    }

    /// 408: the request body arrived too slowly.
    pub fn request_timeout() -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            "the request body arrived too slowly (server.body_timeout_s and server.min_body_bytes_per_s)",
        )
        .with_code("request_timeout")
    }

    /// 415.
    pub fn unsupported_media(got: &str) -> ApiError {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            format!("Content-Type {got:?} is not supported; send application/json"),
        )
    }

    /// 429 with Retry-After.
    pub fn overloaded(namespace: &str, retry_after: u64) -> ApiError {
        let mut e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            format!(
                "namespace {namespace:?} is at its concurrency and queue limits; retry after {retry_after} s"
            ),
        )
        .with_code("rate_limit_exceeded");
        e.retry_after = Some(retry_after);
        e
    }

    /// 501: a route whose backing feature is not in this build.
    pub fn not_implemented(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "not_implemented_error",
            message,
        )
        .with_code("not_implemented")
    }

    /// 503: the server is shutting down or the engine stopped.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message);
        e.retry_after = Some(1);
        e
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// Sets `param`.
    pub fn with_param(mut self, param: impl Into<String>) -> ApiError {
        self.param = Some(param.into());
        self
    }

    /// Sets `code`.
    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    /// The JSON body.
    pub fn to_json(&self) -> serde_json::Value {
        let mut body = json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        });
        self.add_figures(&mut body);
        body
    }

    /// Adds `n_prompt_tokens` and `n_ctx` to `body["error"]` when the context was exceeded.
    pub fn add_figures(&self, body: &mut serde_json::Value) {
        if let Some(&(n_prompt, n_ctx)) = self.exceeded.as_deref() {
            body["error"]["n_prompt_tokens"] = json!(n_prompt);
            body["error"]["n_ctx"] = json!(n_ctx);
        }
    }

    /// The HTTP response.
    pub fn into_response(self) -> Response {
        let mut resp = json_response(self.status, &self.to_json());
        if let Some(s) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

impl From<memoria_sched::EngineError> for ApiError {
    fn from(e: memoria_sched::EngineError) -> ApiError {
        use memoria_sched::EngineError as E;
        match e {
            E::ContextOverflow { have, adding, max } => ApiError::context_exceeded(
                "messages",
                have.saturating_add(adding),
                max,
                format!(
                    "the request ({} tokens: {have} + {adding}) exceeds the available context size ({max} tokens), this model's maximum context length",
                    have.saturating_add(adding)
                ),
            ),
            E::InvalidArgument(m) => ApiError::bad_request(m),
            E::NoSavedSession(name) => {
                ApiError::not_found(format!("no saved session {name:?} in this namespace"))
            }
            E::NotFound(id) => ApiError::not_found(format!("session {} not found", id.0)),
            E::Busy(id) => ApiError::new(
                StatusCode::CONFLICT,
                "invalid_request_error",
                format!("session {} is busy", id.0),
            ),
            E::Stopped | E::Cancelled => ApiError::unavailable("the engine is shutting down"),
            E::Restarting => ApiError::unavailable(
                "the engine is restarting after an internal error; retry shortly",
            )
            .with_code("engine_restarting"),
            E::Panicked(command) => ApiError::internal(format!(
                "internal error in the engine's `{command}` command (a bug, logged by the server); the request failed, its session was closed and the server carries on"
            ))
            .with_code("engine_command_failed"),
            E::TooManySessions(n) => {
                let mut e = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    format!("the engine has its maximum of {n} sessions open; retry after 1 s"),
                )
                .with_code("rate_limit_exceeded");
                e.retry_after = Some(1);
                e
            }
            E::Pool(memoria_kv::PoolError::QuotaExceeded { cap, needed, .. }) if needed > cap => {
                ApiError::bad_request(format!(
                    "the request needs {needed} K/V blocks, more than this namespace's quota of {cap} (limits.max_blocks) could ever hold; shorten the prompt or lower max_tokens"
                ))
                .with_code("quota_exceeded")
            }
            E::Pool(p @ memoria_kv::PoolError::QuotaExceeded { .. }) => {
                let mut e = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    format!("{p} (limits.max_blocks): retry when its other requests end"),
                )
                .with_code("quota_exceeded");
                e.retry_after = Some(1);
                e
            }
            E::Pool(p @ memoria_kv::PoolError::OutOfBlocks { .. }) => {
                ApiError::unavailable(format!("K/V memory: {p}; retry shortly"))
                    .with_code("out_of_kv_blocks")
            }
            E::Pool(p) => ApiError::internal(format!("K/V memory: {p}")),
            E::Internal(m) => ApiError::internal(m),
            E::Store(s) if s.is_full() => ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "server_error",
                s.to_string(),
            )
            .with_code("insufficient_storage"),
            E::Store(s) if s.is_unavailable() => {
                ApiError::unavailable(s.to_string()).with_code("remote_unavailable")
            }
            E::Store(s) => ApiError::internal(s.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use memoria_sched::EngineError;

    use super::*;

    #[test]
    fn the_session_cap_answers_503() {
        let e = ApiError::from(EngineError::TooManySessions(4096));
        assert_eq!(e.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(e.kind, "rate_limit_error");
        assert_eq!(e.code, Some("rate_limit_exceeded"));
        let r = e.into_response();
        assert_eq!(
            r.headers().get(header::RETRY_AFTER).map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
    }

    #[test]
    fn a_namespace_over_its_block_quota_is_the_clients_limit_not_a_server_error() {
        use memoria_kv::{NamespaceId, PoolError};
        let quota = |held, needed| {
            ApiError::from(EngineError::Pool(PoolError::QuotaExceeded {
                ns: NamespaceId(3),
                cap: 64,
                held,
                needed,
            }))
        };
        let busy = quota(60, 8);
        assert_eq!(busy.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(busy.retry_after, Some(1));
        assert_eq!(busy.code, Some("quota_exceeded"));
        assert!(busy.message.contains("max_blocks"), "{}", busy.message);
        let never = quota(0, 65);
        assert_eq!(never.status, StatusCode::BAD_REQUEST);
        assert!(never.message.contains("quota of 64"), "{}", never.message);
        let full = ApiError::from(EngineError::Pool(PoolError::OutOfBlocks {
            needed: 4,
            available: 1,
        }));
        assert_eq!(full.status, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn engine_panics_and_restarts_have_their_own_answers() {
        let e = ApiError::from(EngineError::Panicked("warm"));
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(e.message.contains("`warm`"), "{}", e.message);
        assert_eq!(e.code, Some("engine_command_failed"));
        let e = ApiError::from(EngineError::Restarting);
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.retry_after, Some(1));
        assert_eq!(e.code, Some("engine_restarting"));
    }
}
