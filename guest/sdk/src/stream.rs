//! [`TokenStream`]: an iterator over a streaming generation's tokens; the final text tail,
//! finish reason and usage are kept for [`TokenStream::finish`].

use crate::raw::session::{FinishReason, GenerationStream, StreamEvent};
use crate::raw::types::Usage;
use crate::{Error, Result};

/// One generated token.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub id: u32,
    /// Text this token completes (may be empty inside a UTF-8 character).
    pub text: String,
}

/// A running generation; dropping it cancels the generation.
#[derive(Debug)]
pub struct TokenStream {
    raw: GenerationStream,
    done: Option<(String, FinishReason, Usage)>,
    failed: bool,
}

impl TokenStream {
    pub(crate) fn new(raw: GenerationStream) -> TokenStream {
        TokenStream {
            raw,
            done: None,
            failed: false,
        }
    }

    /// After the iterator ended: remaining text, why it stopped and the usage.
    pub fn finish(&self) -> Option<&(String, FinishReason, Usage)> {
        self.done.as_ref()
    }
}

impl Iterator for TokenStream {
    type Item = Result<Token>;

    fn next(&mut self) -> Option<Result<Token>> {
        if self.done.is_some() || self.failed {
            return None;
        }
        match self.raw.next() {
            Ok(Some(StreamEvent::Token(t))) => Some(Ok(Token {
                id: t.id,
                text: t.text,
            })),
            Ok(Some(StreamEvent::Done(d))) => {
                self.done = Some(d);
                None
            }
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(Error::from(e)))
            }
        }
    }
}
