//! Vertex AI's prediction route (llama-server's GCP compatibility, on when `AIP_MODE` is
//! `PREDICTION`; the path is `AIP_PREDICT_ROUTE`, `/predict` by default): each of `instances`
//! names an API endpoint in `@requestFormat` (its camelCase name, such as `chatCompletions`,
//! or its path) and is answered by that endpoint, one after the other, unstreamed and in the
//! caller's namespace;
//! `predictions` holds the answers in order, an `{"error": ...}` in place of a failed one.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::body::{Response, ok_json};
use crate::error::ApiError;
use crate::openai::Ctx;
use crate::routes::{self, Api};

/// The most instances one request may carry (llama-server's limit).
const MAX_INSTANCES: usize = 128;

/// Paths an instance may name, by their camelCase names (`/v1/chat/completions` is
/// `chatCompletions`; the first path of a name wins).
const PATHS: &[&str] = &[
    "/v1/chat/completions",
    "/v1/chat/completions/input_tokens",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/responses",
    "/completion",
    "/infill",
    "/embedding",
    "/tokenize",
    "/detokenize",
    "/apply-template",
];

/// llama-server's camelCase name of a path: `/v1` dropped, each `/`, `-` or `_` capitalising
/// the next letter.
fn camel(path: &str) -> String {
    let p = path.strip_prefix("/v1").unwrap_or(path);
    let p = p.strip_prefix('/').unwrap_or(p);
    let mut out = String::new();
    let mut cap = false;
    for c in p.chars() {
        if matches!(c, '/' | '-' | '_') {
            cap = true;
        } else {
            out.push(if cap { c.to_ascii_uppercase() } else { c });
            cap = false;
        }
    }
    out
}

/// The endpoint an instance's `@requestFormat` names.
fn endpoint_of(format: &str) -> Option<Api> {
    let path = if format.starts_with('/') {
        Some(format)
    } else {
        PATHS.iter().copied().find(|p| camel(p) == format)
    }?;
    match routes::lookup(path)? {
        (Api::Predict | Api::Models | Api::Props | Api::Slots | Api::SlotAction, _) => None,
        (api, "") => Some(api),
        _ => None,
    }
}

/// Answers a `/predict` request.
pub async fn handle(ctx: Ctx, body: Bytes) -> Result<Response, ApiError> {
    let v: Value = crate::openai::parse_json(&body)?;
    let Some(instances) = v.get("instances").and_then(Value::as_array) else {
        return Err(ApiError::invalid(
            "instances",
            "the request body must include an array field named `instances`",
        ));
    };
    if instances.len() > MAX_INSTANCES {
        return Err(ApiError::invalid(
            "instances",
            format!(
                "`instances` has {} entries; at most {MAX_INSTANCES} are allowed",
                instances.len()
            ),
        ));
    }
    let mut predictions = Vec::with_capacity(instances.len());
    for i in instances {
        predictions.push(instance(&ctx, i).await);
    }
    Ok(ok_json(&json!({"predictions": predictions})))
}

fn error_of(e: &ApiError) -> Value {
    json!({"error": {"code": e.status.as_u16(), "message": e.message, "type": e.kind}})
}

/// One instance's answer (or its error object).
async fn instance(ctx: &Ctx, instance: &Value) -> Value {
    let Some(obj) = instance.as_object() else {
        return error_of(&ApiError::bad_request(
            "each instance must be a JSON object",
        ));
    };
    let Some(format) = obj.get("@requestFormat").and_then(Value::as_str) else {
        return error_of(&ApiError::bad_request(
            "each instance must include a string `@requestFormat`",
        ));
    };
    let Some(api) = endpoint_of(format) else {
        return error_of(&ApiError::bad_request(format!(
            "no endpoint for `@requestFormat` {:?} (e.g. chatCompletions, completions, embeddings)",
            format.chars().take(100).collect::<String>()
        )));
    };
    let mut payload = obj.clone();
    payload.remove("@requestFormat");
    if payload.contains_key("stream") {
        payload.insert("stream".into(), json!(false));
    }
    let body = Bytes::from(Value::Object(payload).to_string());
    let r = run(ctx, api, body).await;
    match r {
        Ok(resp) => match resp.into_body().collect().await {
            Ok(b) => serde_json::from_slice(&b.to_bytes()).unwrap_or(Value::Null),
            Err(_) => error_of(&ApiError::internal(
                "the endpoint's answer could not be read",
            )),
        },
        Err(e) => error_of(&e),
    }
}

/// The endpoint's answer (boxed: `/predict` is itself an endpoint of the router).
fn run<'a>(
    ctx: &'a Ctx,
    api: Api,
    body: Bytes,
) -> Pin<Box<dyn Future<Output = Result<Response, ApiError>> + Send + 'a>> {
    Box::pin(crate::router::with_body(
        ctx.state.clone(),
        ctx.ns.clone(),
        (api, "", ""),
        None,
        body,
        ctx.started,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_names_map_to_endpoints() {
        assert_eq!(camel("/v1/chat/completions"), "chatCompletions");
        assert_eq!(camel("/apply-template"), "applyTemplate");
        assert_eq!(camel("/v1/messages/count_tokens"), "messagesCountTokens");
        assert_eq!(endpoint_of("chatCompletions"), Some(Api::Chat));
        assert_eq!(endpoint_of("completions"), Some(Api::Completions));
        assert_eq!(endpoint_of("completion"), Some(Api::Completion));
        assert_eq!(endpoint_of("/v1/embeddings"), Some(Api::Embeddings));
        assert_eq!(endpoint_of("/slots/0"), None);
        assert_eq!(endpoint_of("nothing"), None);
    }
}
