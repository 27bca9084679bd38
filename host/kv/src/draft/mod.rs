//! Draft tokens for speculative decoding, from token memory the host already holds, cheapest
//! source first: the session's own context ([`ContextIndex`]: the earlier occurrence of its
//! last n tokens whose context agrees longest, prompt lookup) and its isolation group's
//! memory of earlier sequences ([`GroupMemory`]: an n-gram table over a bounded ring of
//! tokens, one per group, never shared across groups, so no tenant's text can become
//! another's draft), then the pool's resident sealed blocks of the same group
//! (`BlockPool::draft_from_blocks`). [`DraftLength`] adapts how many tokens a session drafts
//! to how many were accepted and to what a row costs ([`RowCost`], measured from the engine's
//! passes). Every table is sized when it is created; drafting and recording allocate nothing.
//!
//! A draft only proposes: the engine verifies it against the model, so a wrong or stale draft
//! costs speed, never a different token.

mod context;
mod cost;
mod length;
mod memory;
pub(crate) mod ngram;

pub use context::ContextIndex;
pub use cost::RowCost;
pub use length::{DraftLength, ROW_COST};
pub use memory::{DraftMemory, GroupMemory};
pub use ngram::{MAX_N, MIN_N, group_key};
