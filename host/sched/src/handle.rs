//! The callers' side of the engine: [`EngineHandle`] starts the engine thread and sends it
//! commands; every method is async and awaits the engine's reply over a oneshot channel, so
//! tokio tasks never block a runtime thread. Generations stream [`Event`]s through a
//! [`GenerationStream`]; dropping the stream cancels the generation. Embeddings go through the
//! engine too, behind its cache (`embed`).

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

use memoria_kv::{
    BlockHash, BlockPool, KvLayout, ModelFingerprint, NamespaceId, NamespaceSalt, NamespaceTable,
    Namespaces, PoolStats, RootShape,
};
use memoria_model::llama::Model;
use memoria_model::tokenizer::Tokenizer;
use tokio::sync::mpsc;

mod cache;
mod embed;
mod owned;
pub use embed::{EMBED_WAVE, Embedded, computed_tokens};
pub use owned::OwnedSession;

use crate::EngineError;
use crate::config::EngineConfig;
use crate::embed_cache::EmbedCache;
use crate::engine::supervisor::{Blueprint, Health, supervise};
use crate::engine::{Command, GenerateParams, Publics, Reply, SessionInfo};
use crate::remote_reads::RemoteReads;
use crate::session::{Event, SessionId};
use crate::stats::EngineStats;

/// A running engine. Cloneable; the engine stops when [`EngineHandle::shutdown`] is called or
/// every handle is dropped. Its thread restarts the engine if the engine loop ever dies
/// ([`EngineHandle::is_up`] is false meanwhile).
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Command>,
    tokenizer: Arc<Tokenizer>,
    model: Arc<Model>,
    health: Arc<Health>,
    stats: Arc<EngineStats>,
    thread: Arc<std::sync::Mutex<Option<JoinHandle<()>>>>,
    remote: Arc<RemoteReads>,
    /// The namespace registry: every namespace's salt, label and policy, by id (shared with the
    /// engine thread and the tier stack).
    namespaces: Arc<Namespaces>,
    /// Embeddings by namespace salt and tokens (see `embed`).
    embeddings: Arc<EmbedCache>,
    /// Every isolation group's draft memory (speculative decoding).
    drafts: Arc<memoria_kv::draft::DraftMemory>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineHandle").finish_non_exhaustive()
    }
}

/// Tokens of a running generation; `next` yields events until `Done` or `Error`.
#[derive(Debug)]
pub struct GenerationStream {
    rx: mpsc::UnboundedReceiver<Event>,
}

impl GenerationStream {
    /// The next event, or `None` once the engine has nothing more to send.
    pub async fn next(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// The next event, blocking the calling thread (not for async contexts).
    pub fn blocking_next(&mut self) -> Option<Event> {
        self.rx.blocking_recv()
    }

    /// The next event if one has arrived, without waiting.
    pub fn try_next(&mut self) -> Option<Event> {
        self.rx.try_recv().ok()
    }
}

impl EngineHandle {
    /// Builds the pool (`cfg.kv_budget_bytes`) and starts the engine thread.
    pub fn start(
        model: Arc<Model>,
        tokenizer: Arc<Tokenizer>,
        mut cfg: EngineConfig,
    ) -> Result<EngineHandle, EngineError> {
        let hp = model.hparams();
        if cfg.max_context == 0 {
            cfg.max_context = hp.n_ctx_train.max(1);
        }
        let layout =
            KvLayout::new(hp.n_layer, hp.kv_dim(), cfg.kv_elem).with_block_tokens(cfg.block_tokens);
        let pool = BlockPool::new(layout, cfg.kv_budget_bytes)?;
        let health = Arc::new(Health::new(pool.stats()));
        let stats = Arc::new(EngineStats::default());
        let fingerprint = ModelFingerprint(model.fingerprint());
        let namespaces = cfg
            .store
            .as_ref()
            .map_or_else(Arc::default, |s| s.namespaces().clone());
        namespaces.bind(RootShape::new(fingerprint, &layout));
        let publics = Arc::new(Publics::default());
        let remote = Arc::new(RemoteReads::new(
            cfg.store.clone(),
            fingerprint,
            layout,
            namespaces.clone(),
            stats.clone(),
            publics.clone(),
        ));
        let embeddings = Arc::new(EmbedCache::new(cfg.embed_cache_entries));
        let drafts = Arc::new(memoria_kv::draft::DraftMemory::new(
            cfg.draft_memory_tokens,
            cfg.draft_groups,
        ));
        let bp = Blueprint {
            model: model.clone(),
            tok: tokenizer.clone(),
            cfg,
            fingerprint,
            layout,
            stats: stats.clone(),
            namespaces: namespaces.clone(),
            drafts: drafts.clone(),
            publics,
        };
        let engine = bp.engine(pool, 1);
        let (tx, rx) = channel();
        let h = health.clone();
        let thread = std::thread::Builder::new()
            .name("memoria-engine".into())
            .spawn(move || supervise(bp, engine, rx, h))
            .map_err(|e| EngineError::Internal(format!("spawning the engine thread: {e}")))?;
        Ok(EngineHandle {
            tx,
            tokenizer,
            model,
            health,
            stats,
            thread: Arc::new(std::sync::Mutex::new(Some(thread))),
            remote,
            namespaces,
            embeddings,
            drafts,
        })
    }

    /// Bytes held for drafting from group memory: the isolation groups' rings and the pool's
    /// index of its resident blocks.
    pub fn draft_memory_bytes(&self) -> usize {
        let index = self.pool_stats().draft_index_bytes.load(Relaxed);
        self.drafts
            .bytes()
            .saturating_add(usize::try_from(index).unwrap_or(usize::MAX))
    }

    /// The namespace registry (the one holder of every namespace's salt).
    pub fn namespaces(&self) -> &Arc<Namespaces> {
        &self.namespaces
    }

    /// Registers the host's namespaces (at start and on every configuration reload): replaces
    /// the registry's table and applies each namespace's priority and block cap to the pool.
    /// Commands name namespaces by id afterwards; one not in the table is refused.
    pub fn register_namespaces(&self, table: NamespaceTable) -> Result<(), EngineError> {
        self.namespaces.register(table);
        self.tx
            .send(Command::Registered)
            .map_err(|_| EngineError::Stopped)
    }

    /// The registered salt of `ns`.
    fn salt(&self, ns: NamespaceId) -> Result<NamespaceSalt, EngineError> {
        self.namespaces
            .salt(ns)
            .ok_or_else(|| EngineError::Internal(format!("namespace {ns} is not registered")))
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &Arc<Tokenizer> {
        &self.tokenizer
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// Block pool figures (per namespace and total) of the current pool.
    pub fn pool_stats(&self) -> Arc<PoolStats> {
        self.health.pool_stats()
    }

    /// Whether the engine loop is running: false from the moment it dies until its supervisor
    /// has started it again (and after it stopped).
    pub fn is_up(&self) -> bool {
        self.health.is_up()
    }

    /// Engine figures.
    pub fn stats(&self) -> &Arc<EngineStats> {
        &self.stats
    }

    async fn call<T>(
        &self,
        name: &'static str,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<T, EngineError> {
        let (reply, rx) = Reply::channel(name);
        self.tx
            .send(make(reply))
            .map_err(|_| EngineError::Stopped)?;
        rx.await.map_err(|_| EngineError::Stopped)?
    }

    /// Opens an empty session in `ns` (registered; its cached blocks are keyed with the
    /// registry's salt for it).
    pub async fn open(&self, ns: NamespaceId) -> Result<SessionId, EngineError> {
        self.call("open", |reply| Command::Open { ns, reply }).await
    }

    /// Opens a session of `ns` holding `tokens` (computed lazily, by its first job) in one
    /// round trip; a remote tier is asked for the prompt's blocks first, on this task. See
    /// [`OwnedSession::open`] for a session that closes when dropped.
    pub async fn open_with(
        &self,
        ns: NamespaceId,
        tokens: Vec<u32>,
    ) -> Result<SessionId, EngineError> {
        Ok(self.open_keeping(ns, tokens, false).await?.0)
    }

    /// [`EngineHandle::open_with`], also giving back (with `keep`) a copy of the pool's salted
    /// hashes of the prompt's whole blocks, where the caller hashed them (with a remote tier):
    /// host-internal keys, for the host's own residency bookkeeping; they never leave the host.
    pub(crate) async fn open_keeping(
        &self,
        ns: NamespaceId,
        tokens: Vec<u32>,
        keep: bool,
    ) -> Result<(SessionId, Option<Arc<[BlockHash]>>), EngineError> {
        if tokens.is_empty() {
            // Its first tokens come later (and are prefetched then).
            return Ok((self.open(ns).await?, None));
        }
        let chain = self.remote.prefetch(ns, &tokens).await;
        let kept = chain
            .as_ref()
            .filter(|_| keep)
            .map(|c| Arc::<[BlockHash]>::from(c.hashes.as_slice()));
        let id = self
            .call("open_with", |reply| Command::OpenWith {
                ns,
                tokens,
                chain,
                reply,
            })
            .await?;
        Ok((id, kept))
    }

    /// Appends tokens (computed lazily, by the next generation); returns the context length.
    /// Tokens that start an empty context are looked up in a remote tier before this returns
    /// (so before any job computes them), on this task.
    pub async fn append(
        &self,
        ns: NamespaceId,
        session: SessionId,
        tokens: Vec<u32>,
    ) -> Result<usize, EngineError> {
        let lookup = self.remote.has_remote().then(|| tokens.clone());
        let added = tokens.len();
        let len = self
            .call("append", |reply| Command::Append {
                ns,
                session,
                tokens,
                reply,
            })
            .await?;
        if let Some(tokens) = lookup
            && len == added
            && let Some(chain) = self.remote.prefetch(ns, &tokens).await
        {
            // No reply awaited: it reaches the engine before any job this caller starts next.
            let _ = self.tx.send(Command::Chain {
                ns,
                session,
                tokens,
                chain,
            });
        }
        Ok(len)
    }

    /// Starts generating; the stream yields tokens then `Done`. Dropping it cancels.
    pub fn generate(
        &self,
        ns: NamespaceId,
        session: SessionId,
        params: GenerateParams,
    ) -> Result<GenerationStream, EngineError> {
        let (events, rx) = mpsc::unbounded_channel();
        self.tx
            .send(Command::Generate {
                ns,
                session,
                params,
                events,
            })
            .map_err(|_| EngineError::Stopped)?;
        Ok(GenerationStream { rx })
    }

    /// Computes the session's pending tokens (reusing cached blocks on its first compute) and
    /// returns the logits after its last token.
    pub async fn prefill(
        &self,
        ns: NamespaceId,
        session: SessionId,
    ) -> Result<Vec<f32>, EngineError> {
        self.call("prefill", |reply| Command::Prefill { ns, session, reply })
            .await
    }

    /// Computes a new session's appended tokens with logits after each one (nothing taken from
    /// the cache) and returns the log-probs of every token after the first, with `top`
    /// alternatives each (≤ 20); the session then holds the prompt as after [`Self::prefill`].
    pub async fn score(
        &self,
        ns: NamespaceId,
        session: SessionId,
        top: usize,
    ) -> Result<Vec<crate::sampling::TokenLogprobs>, EngineError> {
        self.call("score", |reply| Command::Score {
            ns,
            session,
            top,
            reply,
        })
        .await
    }

    /// Computes a new session's appended tokens with logits after each one (nothing taken from
    /// the cache), as [`Self::score`] does, and returns the raw logits rows after positions
    /// `from..` (the model's whole vocabulary each, position after position): teacher forcing
    /// through the engine's own batched pass.
    pub async fn score_rows(
        &self,
        ns: NamespaceId,
        session: SessionId,
        from: usize,
    ) -> Result<Vec<f32>, EngineError> {
        self.call("score_rows", |reply| Command::ScoreRows {
            ns,
            session,
            from,
            reply,
        })
        .await
    }

    /// A new session sharing every block of `session` (nothing copied).
    pub async fn fork(
        &self,
        ns: NamespaceId,
        session: SessionId,
    ) -> Result<SessionId, EngineError> {
        self.call("fork", |reply| Command::Fork { ns, session, reply })
            .await
    }

    /// Drops every token at position `len` and after.
    pub async fn truncate(
        &self,
        ns: NamespaceId,
        session: SessionId,
        len: usize,
    ) -> Result<(), EngineError> {
        self.call("truncate", |reply| Command::Truncate {
            ns,
            session,
            len,
            reply,
        })
        .await
    }

    /// Closes a session; its full blocks stay cached for others.
    pub async fn close(&self, ns: NamespaceId, session: SessionId) -> Result<(), EngineError> {
        self.call("close", |reply| Command::Close { ns, session, reply })
            .await
    }

    /// Context length, pending tokens and whether a job runs.
    pub async fn info(
        &self,
        ns: NamespaceId,
        session: SessionId,
    ) -> Result<SessionInfo, EngineError> {
        self.call("info", |reply| Command::Info { ns, session, reply })
            .await
    }

    /// Logits after the session's last computed token, if it was computed with logits.
    pub async fn logits(
        &self,
        ns: NamespaceId,
        session: SessionId,
    ) -> Result<Option<Vec<f32>>, EngineError> {
        self.call("logits", |reply| Command::Logits { ns, session, reply })
            .await
    }

    /// Every token of the session's context.
    pub async fn tokens(
        &self,
        ns: NamespaceId,
        session: SessionId,
    ) -> Result<Vec<u32>, EngineError> {
        self.call("tokens", |reply| Command::Tokens { ns, session, reply })
            .await
    }

    /// Lets running generations finish, then stops the engine thread and waits for it.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Command::Shutdown);
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}
