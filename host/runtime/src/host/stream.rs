//! `memoria:llm/session.generation-stream`: a running generation held in the store's table.
//! Dropping the handle drops the engine stream, which cancels the generation.

use memoria_sched::{Event, GenerationStream};
use wasmtime::component::Resource;

use crate::TenantState;
use crate::bindings::WitError;
use crate::bindings::memoria::llm::session::{HostGenerationStream, StreamEvent, Token};
use crate::host::pad::GenerationPad;
use crate::host::session::{finish, usage};

/// A guest's streaming generation.
#[derive(Debug)]
pub struct StreamRes {
    stream: GenerationStream,
    done: bool,
    pad: GenerationPad,
}

impl StreamRes {
    pub(crate) fn new(stream: GenerationStream, pad: GenerationPad) -> StreamRes {
        StreamRes {
            stream,
            done: false,
            pad,
        }
    }
}

impl HostGenerationStream for TenantState {
    async fn next(
        &mut self,
        s: Resource<StreamRes>,
    ) -> wasmtime::Result<Result<Option<StreamEvent>, WitError>> {
        let res = self.table.get_mut(&s)?;
        if res.done {
            return Ok(Ok(None));
        }
        let ev = res.stream.next().await;
        if matches!(ev, Some(Event::Token { .. } | Event::Done { .. })) {
            let wait = res.pad.first_output();
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        let res = self.table.get_mut(&s)?;
        let out = match ev {
            Some(Event::Token { id, text, .. }) => {
                self.tokens_left = self.tokens_left.saturating_sub(1);
                return Ok(Ok(Some(StreamEvent::Token(Token {
                    id,
                    text: text.into(),
                }))));
            }
            Some(Event::Done {
                reason,
                text_tail,
                usage: u,
                ..
            }) => Ok(Some(StreamEvent::Done((
                text_tail,
                finish(reason),
                usage(res.pad.finish(u)),
            )))),
            Some(Event::Error(msg)) => Err(WitError::Unavailable(msg)),
            None => Err(WitError::Unavailable(
                "the engine ended the generation without a result".into(),
            )),
        };
        self.table.get_mut(&s)?.done = true;
        Ok(out)
    }

    async fn drop(&mut self, s: Resource<StreamRes>) -> wasmtime::Result<()> {
        self.table.delete(s)?;
        Ok(())
    }
}
