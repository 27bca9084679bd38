//! Re-registers the `memoria:llm` functions that take bulk arguments (text, token lists,
//! message lists, names) with lazily lifted parameters, so their size is checked against the
//! namespace's `max_host_call_bytes` before anything is copied (see `bounded`). After the check
//! they call the same trait methods as the generated bindings.

use std::sync::atomic::Ordering::Relaxed;

use wasmtime::StoreContextMut;
use wasmtime::component::{ComponentType, Lift, Linker, Resource, WasmList, WasmStr};

use crate::TenantState;
use crate::bindings::WitError;
use crate::bindings::memoria::llm::{cache, embeddings, log, models, session};
use crate::bounded;
use crate::host::session::SessionRes;

/// A `models.message` whose strings stay in guest memory until checked.
#[derive(ComponentType, Lift)]
#[component(record)]
struct MessageRef {
    role: WasmStr,
    content: WasmStr,
}

type Store<'a> = StoreContextMut<'a, TenantState>;

/// Copies a bounded argument or returns the guest-facing error from the host function.
macro_rules! bounded {
    ($e:expr) => {
        match $e? {
            Ok(v) => v,
            Err(e) => return Ok((Err(e),)),
        }
    };
}

pub fn add_bounded(linker: &mut Linker<TenantState>) -> wasmtime::Result<()> {
    let mut m = linker.instance("memoria:llm/models@0.1.0")?;
    m.func_wrap_async(
        "tokenize",
        |mut st: Store<'_>, (text, special): (WasmStr, bool)| {
            Box::new(async move {
                let text = bounded!(bounded::string(&st, &text, "text"));
                Ok((models::Host::tokenize(st.data_mut(), text, special).await?,))
            })
        },
    )?;
    m.func_wrap_async(
        "detokenize",
        |mut st: Store<'_>, (tokens,): (WasmList<u32>,)| {
            Box::new(async move {
                let tokens = bounded!(bounded::tokens(&st, &tokens, "token list"));
                Ok((models::Host::detokenize(st.data_mut(), tokens).await?,))
            })
        },
    )?;
    m.func_wrap_async(
        "apply-chat-template",
        |mut st: Store<'_>, (msgs, add): (WasmList<MessageRef>, bool)| {
            Box::new(async move {
                let msgs = bounded!(messages(&mut st, &msgs));
                Ok((models::Host::apply_chat_template(st.data_mut(), msgs, add).await?,))
            })
        },
    )?;

    let mut s = linker.instance("memoria:llm/session@0.1.0")?;
    s.func_wrap_async(
        "[static]session.restore",
        |mut st: Store<'_>, (name,): (WasmStr,)| {
            Box::new(async move {
                let name = bounded!(bounded::string(&st, &name, "session name"));
                Ok((session::HostSession::restore(st.data_mut(), name).await?,))
            })
        },
    )?;
    s.func_wrap_async(
        "[method]session.append-text",
        |mut st: Store<'_>, (this, text): (Resource<SessionRes>, WasmStr)| {
            Box::new(async move {
                let text = bounded!(bounded::string(&st, &text, "text"));
                Ok((session::HostSession::append_text(st.data_mut(), this, text).await?,))
            })
        },
    )?;
    s.func_wrap_async(
        "[method]session.append-tokens",
        |mut st: Store<'_>, (this, tokens): (Resource<SessionRes>, WasmList<u32>)| {
            Box::new(async move {
                let tokens = bounded!(bounded::tokens(&st, &tokens, "token list"));
                Ok((session::HostSession::append_tokens(st.data_mut(), this, tokens).await?,))
            })
        },
    )?;
    s.func_wrap_async(
        "[method]session.save",
        |mut st: Store<'_>, (this, name): (Resource<SessionRes>, WasmStr)| {
            Box::new(async move {
                let name = bounded!(bounded::string(&st, &name, "session name"));
                Ok((session::HostSession::save(st.data_mut(), this, name).await?,))
            })
        },
    )?;

    let mut e = linker.instance("memoria:llm/embeddings@0.1.0")?;
    e.func_wrap_async(
        "embed",
        |mut st: Store<'_>, (texts,): (WasmList<WasmStr>,)| {
            Box::new(async move {
                let texts = bounded!(bounded::strings(&mut st, &texts, "texts"));
                Ok((embeddings::Host::embed(st.data_mut(), texts).await?,))
            })
        },
    )?;

    let mut c = linker.instance("memoria:llm/cache@0.1.0")?;
    c.func_wrap_async(
        "warm",
        |mut st: Store<'_>, (tokens, ttl, prio): (WasmList<u32>, Option<u64>, Option<i32>)| {
            Box::new(async move {
                let tokens = bounded!(bounded::tokens(&st, &tokens, "token list"));
                Ok((cache::Host::warm(st.data_mut(), tokens, ttl, prio).await?,))
            })
        },
    )?;

    let mut l = linker.instance("memoria:llm/log@0.1.0")?;
    l.func_wrap_async(
        "log",
        |mut st: Store<'_>, (level, msg): (log::Level, WasmStr)| {
            Box::new(async move {
                let text = msg.to_str(&st)?;
                let max = st.data().max_call_bytes();
                let cut = floor_char_boundary(&text, max);
                let text = text[..cut].to_string();
                log::Host::log(st.data_mut(), level, text).await?;
                Ok(())
            })
        },
    )?;
    Ok(())
}

/// Largest index `<= max` on a char boundary of `s`.
fn floor_char_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

/// The messages, copied only if their total size is within the limit.
fn messages(
    st: &mut Store<'_>,
    l: &WasmList<MessageRef>,
) -> wasmtime::Result<Result<Vec<models::Message>, WitError>> {
    let max = st.data().max_call_bytes();
    let stats = st.data().ns.host.stats.clone();
    let refuse = |bytes: usize| {
        stats.host_call_refused.fetch_add(1, Relaxed);
        Ok(Err(WitError::InvalidArgument(format!(
            "chat messages of {bytes} bytes exceed this namespace's max_host_call_bytes = {max}"
        ))))
    };
    let mut bytes = l.len().saturating_mul(16);
    if bytes > max {
        return refuse(bytes);
    }
    let views = l
        .iter(&mut *st)?
        .collect::<wasmtime::Result<Vec<MessageRef>>>()?;
    for m in &views {
        bytes = bytes.saturating_add(m.role.to_str(&*st)?.len() + m.content.to_str(&*st)?.len());
    }
    if bytes > max {
        return refuse(bytes);
    }
    stats.host_call_bytes.fetch_add(bytes as u64, Relaxed);
    let mut out = Vec::with_capacity(views.len());
    for m in &views {
        out.push(models::Message {
            role: m.role.to_str(&*st)?.into_owned(),
            content: m.content.to_str(&*st)?.into_owned(),
        });
    }
    Ok(Ok(out))
}
