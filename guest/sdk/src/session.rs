//! [`Session`] (a host K/V session of the caller's namespace) and [`SessionBuilder`] (restore a
//! named session or start one from a prefix, optionally pinning the prefix in the cache).

use crate::raw::session::{Generation, Session as RawSession};
use crate::{Error, Params, Result, TokenStream};

/// A session; dropping it closes the host session.
#[derive(Debug)]
pub struct Session {
    raw: RawSession,
}

impl Session {
    /// A new empty session.
    pub fn new() -> Result<Session> {
        Ok(Session {
            raw: RawSession::open()?,
        })
    }

    /// The session saved as `name` in this namespace.
    pub fn restore(name: &str) -> Result<Session> {
        Ok(Session {
            raw: RawSession::restore(name)?,
        })
    }

    /// Starts a builder.
    pub fn builder() -> SessionBuilder {
        SessionBuilder::default()
    }

    /// Appends text; returns the context length.
    pub fn append(&self, text: &str) -> Result<u32> {
        Ok(self.raw.append_text(text)?)
    }

    /// Appends tokens; returns the context length.
    pub fn append_tokens(&self, tokens: &[u32]) -> Result<u32> {
        Ok(self.raw.append_tokens(tokens)?)
    }

    /// Generates to the end.
    pub fn generate(&self, params: &Params) -> Result<Generation> {
        Ok(self.raw.generate(&params.raw())?)
    }

    /// Generates token by token.
    pub fn stream(&self, params: &Params) -> Result<TokenStream> {
        Ok(TokenStream::new(self.raw.stream(&params.raw())?))
    }

    /// A new session sharing this one's K/V.
    pub fn fork(&self) -> Result<Session> {
        Ok(Session {
            raw: self.raw.fork()?,
        })
    }

    /// Keeps the first `len` tokens.
    pub fn truncate(&self, len: u32) -> Result<()> {
        Ok(self.raw.truncate(len)?)
    }

    /// Tokens in the context.
    pub fn len(&self) -> Result<u32> {
        Ok(self.raw.len()?)
    }

    /// Whether the context is empty.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Every token of the context.
    pub fn tokens(&self) -> Result<Vec<u32>> {
        Ok(self.raw.tokens()?)
    }

    /// Saves the context as `name` in this namespace.
    pub fn save(&self, name: &str) -> Result<()> {
        Ok(self.raw.save(name)?)
    }
}

/// Builds a [`Session`]: restore `name` if it was saved, else start from the prefix texts.
#[derive(Clone, Debug, Default)]
pub struct SessionBuilder {
    name: Option<String>,
    prefix: Vec<String>,
    pin_ttl_ms: Option<Option<u64>>,
}

impl SessionBuilder {
    /// Restores the session saved as `name` when there is one.
    pub fn restore_or_new(mut self, name: impl Into<String>) -> SessionBuilder {
        self.name = Some(name.into());
        self
    }

    /// Text a new session starts with (e.g. a system prompt); several are appended in order.
    pub fn prefix(mut self, text: impl Into<String>) -> SessionBuilder {
        self.prefix.push(text.into());
        self
    }

    /// Computes the prefix and pins it in the cache for `ttl_ms` (None: until restart), so
    /// every session starting with it shares its K/V.
    pub fn pin_prefix(mut self, ttl_ms: Option<u64>) -> SessionBuilder {
        self.pin_ttl_ms = Some(ttl_ms);
        self
    }

    /// Opens the session; returns it and whether it was restored.
    pub fn open(self) -> Result<(Session, bool)> {
        if let Some(name) = &self.name {
            match Session::restore(name) {
                Ok(s) => return Ok((s, true)),
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let s = Session::new()?;
        for text in &self.prefix {
            s.append(text)?;
        }
        if let Some(ttl) = self.pin_ttl_ms {
            if !self.prefix.is_empty() {
                crate::cache::warm(&s.tokens()?, ttl)?;
            }
        }
        Ok((s, false))
    }
}
