//! The API's route table: every path a namespace's API answers (OpenAI's under `/v1` and without
//! it, llama-server's own) mapped to one endpoint, with the methods it takes and the label its
//! responses are counted under. One table for the host's root and for `/ns/{namespace}/...`.

use http::Method;

/// One API endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI chat completions (`/v1/chat/completions`, `/chat/completions`).
    Chat,
    /// llama-server's `/v1/chat/completions/input_tokens`: a conversation's prompt tokens.
    ChatInputTokens,
    /// OpenAI completions (`/v1/completions`).
    Completions,
    /// OpenAI embeddings (`/v1/embeddings`).
    Embeddings,
    /// `/v1/models`, `/models` and `/v1/models/{id}`.
    Models,
    /// llama-server's `/tokenize`.
    Tokenize,
    /// llama-server's `/detokenize`.
    Detokenize,
    /// llama-server's `/completion` and `/completions`.
    Completion,
    /// llama-server's `/infill`.
    Infill,
    /// llama-server's `/embedding` and `/embeddings`.
    Embedding,
    /// llama-server's `GET /props`.
    Props,
    /// llama-server's `GET /slots`.
    Slots,
    /// llama-server's `POST /slots/{id}?action=...`.
    SlotAction,
    /// llama-server's `/apply-template`.
    ApplyTemplate,
    /// Anthropic's `/v1/messages`.
    Messages,
    /// Anthropic's `/v1/messages/count_tokens`.
    CountTokens,
    /// OpenAI's Responses API, `/v1/responses` (`/responses`).
    Responses,
    /// Vertex AI's prediction route (`AIP_PREDICT_ROUTE`, only when `AIP_MODE=PREDICTION`).
    Predict,
}

impl Api {
    /// The label responses are counted under (`/metrics`).
    pub fn label(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::ChatInputTokens => "input_tokens",
            Api::Completions => "completions",
            Api::Embeddings => "embeddings",
            Api::Models => "models",
            Api::Tokenize => "tokenize",
            Api::Detokenize => "detokenize",
            Api::Completion => "completion",
            Api::Infill => "infill",
            Api::Embedding => "embedding",
            Api::Props => "props",
            Api::Slots | Api::SlotAction => "slots",
            Api::ApplyTemplate => "apply_template",
            Api::Messages => "messages",
            Api::CountTokens => "count_tokens",
            Api::Responses => "responses",
            Api::Predict => "predict",
        }
    }

    /// Whether errors take Anthropic's shape.
    pub fn anthropic(self) -> bool {
        matches!(self, Api::Messages | Api::CountTokens)
    }

    /// Whether errors take llama-server's shape (its own endpoints) rather than OpenAI's.
    pub fn native(self) -> bool {
        matches!(
            self,
            Api::Tokenize
                | Api::Detokenize
                | Api::Completion
                | Api::Infill
                | Api::Embedding
                | Api::Props
                | Api::Slots
                | Api::SlotAction
                | Api::ApplyTemplate
        )
    }

    /// Whether `method` is one this endpoint takes.
    pub fn takes(self, method: &Method) -> bool {
        match self {
            Api::Models | Api::Props | Api::Slots => method == Method::GET,
            _ => method == Method::POST,
        }
    }
}

/// The endpoint of `path` (a trailing slash ignored) and what follows its prefix (a model id),
/// or None when no endpoint has that path.
pub fn lookup(path: &str) -> Option<(Api, &str)> {
    let p = path.strip_suffix('/').unwrap_or(path);
    let api = match p {
        "/v1/chat/completions" | "/chat/completions" => Api::Chat,
        "/v1/chat/completions/input_tokens" | "/chat/completions/input_tokens" => {
            Api::ChatInputTokens
        }
        "/v1/completions" => Api::Completions,
        "/v1/embeddings" => Api::Embeddings,
        "/v1/models" | "/models" => Api::Models,
        "/tokenize" => Api::Tokenize,
        "/detokenize" => Api::Detokenize,
        "/completion" | "/completions" => Api::Completion,
        "/infill" => Api::Infill,
        "/embedding" | "/embeddings" => Api::Embedding,
        "/props" => Api::Props,
        "/slots" => Api::Slots,
        "/apply-template" => Api::ApplyTemplate,
        "/v1/messages" | "/messages" => Api::Messages,
        "/v1/messages/count_tokens" | "/messages/count_tokens" => Api::CountTokens,
        "/v1/responses" | "/responses" => Api::Responses,
        _ => {
            if let Some(id) = p.strip_prefix("/slots/") {
                return Some((Api::SlotAction, id));
            }
            let id = p
                .strip_prefix("/v1/models/")
                .or_else(|| p.strip_prefix("/models/"))?;
            return (!id.is_empty()).then_some((Api::Models, id));
        }
    };
    Some((api, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_and_bare_paths_meet() {
        assert_eq!(lookup("/chat/completions"), Some((Api::Chat, "")));
        assert_eq!(lookup("/v1/chat/completions/"), Some((Api::Chat, "")));
        assert_eq!(lookup("/models"), Some((Api::Models, "")));
        assert_eq!(lookup("/v1/models/abc"), Some((Api::Models, "abc")));
        assert_eq!(lookup("/v1/models/"), Some((Api::Models, "")));
        assert_eq!(lookup("/v2/models"), None);
        assert_eq!(lookup("/admin"), None);
        assert_eq!(lookup("/completions"), Some((Api::Completion, "")));
        assert_eq!(
            lookup("/chat/completions/input_tokens"),
            Some((Api::ChatInputTokens, ""))
        );
        assert_eq!(lookup("/v1/completions"), Some((Api::Completions, "")));
        assert_eq!(lookup("/slots/3"), Some((Api::SlotAction, "3")));
        assert!(Api::Completion.native() && !Api::Completions.native());
    }
}
