//! The tier stack as the block pool sees it: the [`TierSink`] evicted blocks are demoted through
//! (identified, then handed to the demotion thread) and, per prefix match, the [`TierSource`]
//! that serves only the blocks of the requested chain, verified.

use super::*;

impl TierStack {
    /// A pool-facing sink for one model that demotes on the caller's thread (an engine uses
    /// [`TierStack::intake`]'s, which hands the same work to a thread of the store's).
    pub fn sink(self: &Arc<Self>, model: ModelFingerprint, layout: KvLayout) -> Box<dyn TierSink> {
        Box::new(StackSink(crate::intake::Ctx::new(self, model, layout)))
    }

    /// A source for one prefix match: only blocks of `tokens`' chain under `root` are served.
    pub fn source<'a>(
        &'a self,
        model: ModelFingerprint,
        layout: KvLayout,
        root: BlockHash,
        tokens: &'a [u32],
    ) -> StoreSource<'a> {
        let chain = SessionRecord::chain(&root, tokens, layout.block_tokens);
        self.source_chain(model, layout, root, tokens, chain, (0, root))
    }

    /// [`TierStack::source`] for a chain the caller hashed (a namespace with public prefixes,
    /// see `memoria_kv::hash`): `chain[i]` is block `i`'s hash; the first `public.0` blocks
    /// are checked against the common root `public.1`, the rest against `root`.
    pub fn source_chain<'a>(
        &'a self,
        model: ModelFingerprint,
        layout: KvLayout,
        root: BlockHash,
        tokens: &'a [u32],
        chain: Vec<BlockHash>,
        public: (usize, BlockHash),
    ) -> StoreSource<'a> {
        StoreSource {
            stack: self,
            model,
            layout,
            root,
            tokens,
            chain,
            last_miss: SourceMiss::Absent,
            last_hit: None,
            public,
            salts: (
                self.salt_of_root(model, &layout, &public.1),
                self.salt_of_root(model, &layout, &root),
            ),
        }
    }
}

/// [`TierSink`] that does the hand-off's eviction job inline.
struct StackSink(crate::intake::Ctx);

impl TierSink for StackSink {
    fn demote(&mut self, hash: &BlockHash, ns: NamespaceId, tokens: &[u32], data: &[u8]) {
        self.0.evicted(ns, *hash, tokens.to_vec(), data.to_vec());
    }

    fn keeps(&self) -> Option<LostTier> {
        self.0.stack.keeps()
    }
}

/// [`TierSource`] for one request: knows the requesting chain, so every block served is
/// checked against its namespace root and its exact tokens.
pub struct StoreSource<'a> {
    stack: &'a TierStack,
    model: ModelFingerprint,
    layout: KvLayout,
    root: BlockHash,
    tokens: &'a [u32],
    chain: Vec<BlockHash>,
    /// Why the last fetch failed (a verification failure is told apart from absence).
    last_miss: SourceMiss,
    last_hit: Option<LostTier>,
    /// Leading public blocks and the common root they are checked against.
    public: (usize, BlockHash),
    /// The salts of the common root and of `root`, from the registry.
    salts: (
        Option<memoria_kv::NamespaceSalt>,
        Option<memoria_kv::NamespaceSalt>,
    ),
}

impl std::fmt::Debug for StoreSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSource")
            .field("blocks", &self.chain.len())
            .finish_non_exhaustive()
    }
}

impl TierSource for StoreSource<'_> {
    fn fetch(&mut self, hash: &BlockHash, out: &mut [u8]) -> bool {
        let Some(i) = self.chain.iter().position(|h| h == hash) else {
            return false;
        };
        let b = self.layout.block_tokens;
        let public = i < self.public.0;
        let expect = Expect {
            model: self.model,
            layout: self.layout,
            hash: *hash,
            root: Some(if public { self.public.1 } else { self.root }),
            salt: if public { self.salts.0 } else { self.salts.1 },
            tokens: Some(&self.tokens[i * b..(i + 1) * b]),
        };
        let fetched = self.stack.fetch_checked(&expect, out);
        let found = fetched.is_ok();
        self.last_hit = fetched.ok().map(|f| f.tier);
        self.last_miss = fetched.err().unwrap_or(SourceMiss::Absent);
        found
    }

    fn last_miss(&self) -> SourceMiss {
        self.last_miss
    }

    fn last_hit(&self) -> Option<LostTier> {
        self.last_hit
    }
}
