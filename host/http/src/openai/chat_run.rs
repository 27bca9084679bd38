//! A chat request made ready to run: checked, rendered with the chat template (assistant
//! prefill, tool instructions), tokenized, its format compiled and its budget fitted to the
//! context. One path for every endpoint that speaks in conversations (OpenAI chat, the
//! Responses API, Anthropic Messages), so they differ only in their request and answer shapes.

use memoria_sched::GenerateParams;

use super::chat_check::{Checked, check};
use super::run::Plan;
use super::schema::ChatRequest;
use super::tool_syntax::ToolSyntax;
use super::tools::ToolPlan;
use super::{Ctx, params, structured};
use crate::error::ApiError;

/// A checked chat request with its engine plan.
pub(crate) struct Prepared {
    /// One prompt (the rendered conversation) with its budget, `n` choices.
    pub plan: Plan,
    pub tool_plan: Option<ToolPlan>,
    pub syntax: ToolSyntax,
    /// Log-probs per token asked for (None with tools).
    pub top_logprobs: Option<usize>,
    pub stream: bool,
    pub include_usage: bool,
    /// The conversation as rendered (tool instructions included) and the template's tools, for
    /// rendering its prefixes (cache breakpoints).
    pub messages: Vec<memoria_model::chat::ChatMessage>,
    pub template_tools: Option<Vec<memoria_model::chat::ChatTool>>,
}

/// Checks `req` and builds its plan (nothing runs yet; no admission slot is taken).
pub(crate) async fn prepare(ctx: &Ctx, req: ChatRequest) -> Result<Prepared, ApiError> {
    let syntax = ToolSyntax::detect(&ctx.state.chat);
    let defaults = &ctx.state.config.defaults;
    let speculation = req.speculation;
    let checked = check(
        req,
        ctx.state.engine.tokenizer().n_vocab(),
        syntax,
        defaults,
    )?;
    let Checked {
        n,
        top_logprobs,
        tool_plan,
        format,
        stream,
        include_usage,
        sampling,
        stop,
        ignore_eos,
        messages,
        template_tools,
        syntax,
        max_tokens: (field, requested),
        render,
    } = checked;
    let constraint = structured::constraint(&ctx.state, format).await?;
    let tok = ctx.state.engine.tokenizer().clone();
    let prompt = super::prompt::chat_tokens_as(
        &ctx.state.chat,
        &tok,
        &messages,
        template_tools.as_deref(),
        &render,
    )?;
    let mut budget = [params::token_budget(
        field,
        requested,
        prompt.len(),
        ctx.max_context(),
        (
            ctx.ns.spec.limits.max_tokens_per_request,
            defaults.n_predict,
        ),
    )?];
    params::share_budgets(
        field,
        requested,
        &[prompt.len()],
        n,
        &mut budget,
        ctx.max_context(),
    )?;
    let [budget] = budget;
    let plan = Plan {
        prompts: vec![(prompt, budget)],
        n,
        params: GenerateParams {
            constraint,
            ..params::generate_params(sampling, budget, stop, ignore_eos)
        },
        score: None,
        speculation,
    };
    Ok(Prepared {
        plan,
        top_logprobs: top_logprobs.filter(|_| tool_plan.is_none()),
        tool_plan,
        syntax,
        stream,
        include_usage,
        messages,
        template_tools,
    })
}
