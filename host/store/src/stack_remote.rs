//! The [`TierStack`]'s side of the remote tier: labels per namespace (from the registry), the async prefetch
//! a request awaits before the engine schedules it (remote values verified, decoded and staged
//! in RAM), the staged blocks the engine thread's fetch consumes (a memory copy, no network),
//! write-behind offers of sealed and evicted blocks, and blocks a prefetch found missing on the
//! server written again from the hot pool ([`TierStack::remote_rewrite`]). Invariants: a staged block was
//! verified against the requesting chain (model, layout, hash, namespace root, tokens) and is
//! checked again against the consuming request's root and tokens; staged bytes stay under the
//! remote's `max_inflight_bytes` (oldest dropped first); a bad value is deleted and counted.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use memoria_kv::backing::ChainKeys;
use memoria_kv::{BlockHash, KvLayout, ModelFingerprint, NamespaceSalt, RootShape};

use crate::codec::{self, BlockIdentity, Expect};
use crate::error::StoreError;
use crate::remote::{Lookup, Refusal, RemoteStats, RemoteTier, keys};
use crate::session::{SessionError, SessionRecord};
use crate::stack::TierStack;

/// What a remote prefetch is keyed by: the chain (see [`ChainKeys`]), the namespace's salt
/// (its remote label) and the common salt public blocks are labelled with, if registered.
#[derive(Clone, Copy, Debug)]
pub struct RemoteKeys<'a> {
    pub salt: NamespaceSalt,
    pub chain: ChainKeys<'a>,
    pub common_salt: Option<NamespaceSalt>,
}
/// Label of a namespace whose salt was never registered.
pub const DEFAULT_LABEL: &str = "default";
/// Most blocks one prefetch asks for (16 Ki tokens at B = 16; fewer when the remote's
/// `max_inflight_bytes` holds fewer decoded blocks).
pub const MAX_PREFETCH_BLOCKS: usize = 1024;
/// Raw bytes one MGET of a prefetch asks for (at least one block): one block of a 110M-class
/// model (590 KB of f16 K/V), many of a small one. The server builds every reply of the
/// pipelined commands it has read before writing any, so small runs put the first bytes on
/// the wire sooner and keep its reply buffers small enough to be reused (measured with
/// `memoria bench cluster`, 1,000-token prefix: fetch p50 18 ms against 28–31 ms with 4 MiB
/// runs three at a time).
pub const FETCH_RUN_BYTES: usize = 512 << 10;
/// The shortest deadline a prefetch gets (capped by the tier's `timeout_ms`): one network
/// round trip and a connection's set-up always fit, however fast the model computes.
pub const MIN_PREFETCH_WAIT: Duration = Duration::from_millis(100);

/// How long a prefetch of `blocks` blocks of `block_tokens` tokens may wait, given the
/// engine's recent cost of a prompt token (`None`: not known yet, no deadline but the tier's
/// per-operation timeout): the time computing them would take, and never less than
/// [`MIN_PREFETCH_WAIT`] or `timeout`, whichever is shorter.
pub fn prefetch_wait(
    per_token: Option<Duration>,
    blocks: usize,
    block_tokens: usize,
    timeout: Duration,
) -> Option<Duration> {
    let tokens = u32::try_from(blocks.saturating_mul(block_tokens)).unwrap_or(u32::MAX);
    let compute = per_token?.saturating_mul(tokens);
    Some(compute.max(MIN_PREFETCH_WAIT.min(timeout)))
}

struct StagedBlock {
    root: BlockHash,
    tokens: Vec<u32>,
    /// The block's bytes are `data[at..]`: a raw value is staged as fetched (verified, not
    /// copied), any other encoding decoded (`at` 0).
    data: Vec<u8>,
    at: usize,
}

impl StagedBlock {
    fn bytes(&self) -> &[u8] {
        &self.data[self.at..]
    }
}

/// Staged blocks; `order` is insertion order and may still hold hashes already taken.
#[derive(Default)]
struct Staged {
    map: HashMap<BlockHash, StagedBlock>,
    order: VecDeque<BlockHash>,
    bytes: usize,
}

/// A saved session's shared form, ready to be written to the remote tier.
pub(crate) struct SessionWrite {
    tier: Arc<RemoteTier>,
    key: String,
    value: Vec<u8>,
}

impl SessionWrite {
    /// Writes it now; `done` runs with whether the server acknowledged it.
    pub fn send(self, done: Box<dyn FnOnce(bool) + Send>) {
        self.tier.set_then(self.key, self.value, done);
    }
}

/// The remote tier as the stack holds it.
pub(crate) struct RemoteLink {
    pub tier: Arc<RemoteTier>,
    staged: Mutex<Staged>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    crate::sync::lock(m)
}

impl RemoteLink {
    pub fn new(tier: Arc<RemoteTier>) -> Self {
        RemoteLink {
            tier,
            staged: Mutex::new(Staged::default()),
        }
    }

    fn stage(&self, hash: BlockHash, block: StagedBlock) {
        let cap = self.tier.options().max_inflight_bytes;
        let mut g = lock(&self.staged);
        g.bytes += block.data.len();
        if let Some(old) = g.map.insert(hash, block) {
            g.bytes -= old.data.len();
        } else {
            g.order.push_back(hash);
        }
        while g.bytes > cap {
            let Some(old) = g.order.pop_front() else {
                break;
            };
            if let Some(b) = g.map.remove(&old) {
                g.bytes -= b.data.len();
            }
        }
        // Taken blocks leave their hash in `order` (removed lazily); keep it within bounds.
        if g.order.len() > 2 * g.map.len() + 64 {
            let Staged { map, order, .. } = &mut *g;
            order.retain(|h| map.contains_key(h));
        }
    }

    fn is_staged(&self, hash: &BlockHash) -> bool {
        lock(&self.staged).map.contains_key(hash)
    }

    /// Takes a staged block for `expect` into `out` (a copy); false when none matches.
    pub fn take(&self, expect: &Expect<'_>, out: &mut [u8]) -> bool {
        let mut g = lock(&self.staged);
        let fits = g.map.get(&expect.hash).is_some_and(|b| {
            expect.root.is_none_or(|r| r == b.root)
                && expect.tokens.is_none_or(|t| t == b.tokens.as_slice())
                && b.bytes().len() == out.len()
        });
        if !fits {
            return false;
        }
        let Some(b) = g.map.remove(&expect.hash) else {
            return false;
        };
        g.bytes -= b.data.len();
        out.copy_from_slice(b.bytes());
        true
    }

    /// Offers a block for writing (per the write mode; not once the server has it) under
    /// its namespace's public label and chain root ([`TierStack::remote_names`]).
    pub fn offer(
        &self,
        (label, root): (&str, BlockHash),
        identity: BlockIdentity,
        tokens: &[u32],
        data: &[u8],
    ) {
        if !self.tier.should_write(&identity.hash) {
            return;
        }
        let key = self.tier.key(label, &identity.hash);
        self.tier.put(key, identity, root, tokens, data);
    }
}

impl TierStack {
    /// Adds a remote tier (reads through [`TierStack::prefetch_remote`], writes behind every
    /// sealed block per its write mode).
    pub fn with_remote(mut self, tier: Arc<RemoteTier>) -> TierStack {
        if let Some(d) = self.disk() {
            d.forget_removed_in(tier.clone());
        }
        self.remote = Some(RemoteLink::new(tier));
        self
    }

    /// The remote tier, if any.
    pub fn remote(&self) -> Option<&Arc<RemoteTier>> {
        self.remote.as_ref().map(|r| &r.tier)
    }

    /// The remote-key label of the namespace(s) keyed with `salt`: their registered label
    /// (`[A-Za-z0-9._-]`, 1..=64 bytes), else [`DEFAULT_LABEL`]. The label is public; the salt
    /// is not.
    pub(crate) fn label(&self, salt: &NamespaceSalt) -> String {
        remote_label(&self.namespaces().snapshot(), salt)
    }

    /// The remote write of a saved session, to send once the caller is ready (after the disk
    /// commit); `None` without a remote tier.
    pub(crate) fn remote_session_write(
        &self,
        name: &str,
        record: &SessionRecord,
    ) -> Option<SessionWrite> {
        let r = self.remote.as_ref()?;
        let root = self
            .namespaces()
            .snapshot()
            .root_of_salt(&record.salt, &record.shape());
        Some(SessionWrite {
            tier: r.tier.clone(),
            key: r.tier.session_key(&self.label(&record.salt), name),
            value: record.encode_shared(&root),
        })
    }

    /// The session saved as `name` in the remote tier by a namespace keyed with `salt` (any
    /// host's save), verified: `Ok(None)` when there is none, no remote tier, or the value is
    /// another namespace's (same label, other salt); a damaged value is deleted, counted as a
    /// bad value and answers `Ok(None)`; [`StoreError::RemoteUnavailable`] when the server did
    /// not answer. Never runs on the engine thread: the caller's task awaits the tier's thread.
    pub async fn load_session_remote(
        &self,
        salt: &NamespaceSalt,
        name: &str,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let Some(r) = &self.remote else {
            return Ok(None);
        };
        let key = r.tier.session_key(&self.label(salt), name);
        let found = r.tier.get_many(vec![key.clone()], false).await;
        match found.into_iter().next() {
            Some(Lookup::Value(stored)) => {
                let Some(bytes) = r.tier.open_value(&key, stored) else {
                    return Ok(None);
                };
                let table = self.namespaces().snapshot();
                let root_of = |shape: &RootShape| table.root_of_salt(salt, shape);
                match SessionRecord::decode_shared(&bytes, salt, root_of) {
                    Ok(rec) => Ok(Some(rec)),
                    Err(SessionError::Namespace) => Ok(None),
                    Err(_) => {
                        r.tier.refuse(key, Refusal::Corrupt);
                        Ok(None)
                    }
                }
            }
            Some(Lookup::Absent) => Ok(None),
            _ => Err(StoreError::RemoteUnavailable),
        }
    }

    pub(crate) fn remote_offer(&self, identity: BlockIdentity, tokens: &[u32], data: &[u8]) {
        if let Some(r) = &self.remote {
            let (label, root) = self.remote_names(&identity);
            r.offer((&label, root), identity, tokens, data);
        }
    }

    /// The registered salt whose chain root for `model` and `layout` is `root` (the salt a
    /// host-form stored block read by that chain must carry).
    pub(crate) fn salt_of_root(
        &self,
        model: ModelFingerprint,
        layout: &KvLayout,
        root: &BlockHash,
    ) -> Option<NamespaceSalt> {
        let shape = RootShape::new(model, layout);
        self.namespaces().snapshot().salt_of_root(root, &shape)
    }

    /// What the remote tier knows a block's namespace by, from one registry snapshot: its
    /// public label (see [`TierStack::label`]) and its chain root for the block's model shape.
    fn remote_names(&self, identity: &BlockIdentity) -> (String, BlockHash) {
        let table = self.namespaces().snapshot();
        let label = remote_label(&table, &identity.salt);
        let shape = RootShape::new(identity.model, &identity.layout);
        (label, table.root_of_salt(&identity.salt, &shape))
    }

    /// Whether the remote tier found blocks missing that may be written again (see
    /// [`TierStack::remote_rewrite`]); false without a remote tier.
    pub fn remote_lost_any(&self) -> bool {
        self.remote.as_ref().is_some_and(|r| r.tier.any_lost())
    }

    /// Writes a block this host holds (a prefix match took it from the hot pool) to the remote
    /// tier again if a prefetch found it missing on the server; returns whether it did.
    pub fn remote_rewrite(&self, identity: BlockIdentity, tokens: &[u32], data: &[u8]) -> bool {
        let Some(r) = &self.remote else { return false };
        let (label, root) = self.remote_names(&identity);
        let key = r.tier.key(&label, &identity.hash);
        r.tier.rewrite(key, identity, root, tokens, data)
    }

    /// Block `hash` left this host's tiers: the remote tier no longer takes it to be held
    /// here, so a later prompt looks it up on the server.
    pub(crate) fn remote_left(&self, hash: &BlockHash) {
        if let Some(r) = &self.remote {
            r.tier.forget(hash);
        }
    }

    /// Whether a remote prefetch staged `hash` (and no fetch took it yet).
    pub(crate) fn remote_staged(&self, hash: &BlockHash) -> bool {
        self.remote.as_ref().is_some_and(|r| r.is_staged(hash))
    }

    pub(crate) fn remote_take(&self, expect: &Expect<'_>, out: &mut [u8]) -> bool {
        self.remote.as_ref().is_some_and(|r| r.take(expect, out))
    }

    fn held_locally(&self, hash: &BlockHash) -> bool {
        use crate::tier::Tier;
        self.cold().is_some_and(|c| c.contains(hash))
            || self.disk().is_some_and(|d| d.contains(hash))
            || self.remote.as_ref().is_some_and(|r| r.is_staged(hash))
    }

    /// Looks the full blocks of `tokens` (a context from its start, namespace `salt`) up in
    /// the remote tier, from the first block no local tier holds, in one pipelined batch (MGET
    /// runs of at most [`FETCH_RUN_BYTES`]), verifies each run as it arrives, keeps the leading
    /// run of good values and stages them for the engine's next prefix match. Returns the
    /// blocks staged. Never fails and never runs on the engine thread: the caller's task awaits
    /// the tier's thread. Blocks this host wrote or fetched before are taken to be held locally
    /// (hot) until they leave its tiers (see [`RemoteTier::is_known`]): skipping them costs at
    /// most a recompute.
    ///
    /// `keys`: the chain as the pool keys it (hashed by the caller from the registry's root),
    /// the namespace's salt (its remote label) and the common salt; the leading `n_public`
    /// blocks are looked up (and verified) under the common root and label, the rest under the
    /// namespace's.
    ///
    /// It waits no longer than computing the looked-up blocks would take at `per_token` (see
    /// [`prefetch_wait`]): past that deadline it keeps the leading blocks that arrived, counts
    /// the rest as deadline misses and stops asking.
    pub async fn prefetch_remote(
        &self,
        (model, layout): (ModelFingerprint, KvLayout),
        keys: RemoteKeys<'_>,
        tokens: &[u32],
        per_token: Option<Duration>,
    ) -> usize {
        let Some(r) = &self.remote else { return 0 };
        let b = layout.block_tokens;
        let RemoteKeys {
            salt,
            chain:
                ChainKeys {
                    root,
                    hashes: chain,
                    n_public,
                    public,
                },
            common_salt,
        } = keys;
        // Never past the tokens given (a chain longer than them is the caller's mistake).
        let chain = &chain[..chain.len().min(tokens.len() / b)];
        let common = public.zip(common_salt).map(|(p, salt)| (*p.root(), salt));
        let Ok(raw) = layout.block_bytes() else {
            return 0;
        };
        // One prefetch never stages more than fits, so its leading blocks are not evicted.
        let fit = (r.tier.options().max_inflight_bytes / raw.max(1)).clamp(1, MAX_PREFETCH_BLOCKS);
        let local = |h: &BlockHash| r.tier.is_known(h) || self.held_locally(h);
        let Some(first) = chain.iter().position(|h| !local(h)) else {
            return 0;
        };
        let want: Vec<(usize, BlockHash)> = chain
            .iter()
            .copied()
            .enumerate()
            .skip(first)
            .filter(|(_, h)| !local(h))
            .take(fit)
            .collect();
        // Block i's root and remote label: the common ones for the leading public run.
        let label = self.label(&salt);
        let common_label = common.map(|(_, c)| self.label(&c));
        let key_of = |i: usize| match (&common_label, common) {
            (Some(l), Some((croot, _))) if i < n_public => (l.as_str(), croot),
            _ => (label.as_str(), root),
        };
        let keys = want
            .iter()
            .map(|&(i, h)| r.tier.key(key_of(i).0, &h))
            .collect();
        let run = (FETCH_RUN_BYTES / raw.max(1)).max(1);
        let timeout = Duration::from_millis(r.tier.options().timeout_ms);
        let deadline = prefetch_wait(per_token, want.len(), b, timeout)
            .and_then(|w| tokio::time::Instant::now().checked_add(w));
        let mut runs = r.tier.get_runs(keys, true, run);
        let st = r.tier.stats();
        let mut want = want.into_iter();
        let mut staged = 0;
        'runs: loop {
            let next = match deadline {
                Some(d) => tokio::time::timeout_at(d, runs.recv()).await,
                None => Ok(runs.recv().await),
            };
            let Ok(next) = next else {
                // Dropping `runs` tells the tier's thread to send no further MGET.
                RemoteStats::add(&st.miss_deadline, want.len() as u64);
                break;
            };
            let Some(found) = next else { break };
            // `found` first: zip then never takes a key past this run's answers from `want`.
            for (lookup, (i, hash)) in found.into_iter().zip(want.by_ref()) {
                let stored = match lookup {
                    Lookup::Value(v) => v,
                    Lookup::Absent => {
                        // The server lacks it: if this host holds it, it writes it again.
                        r.tier.mark_lost(&hash);
                        break 'runs;
                    }
                    _ => break 'runs,
                };
                let (block_label, block_root) = key_of(i);
                let key = r.tier.key(block_label, &hash);
                let Some(bytes) = r.tier.open_value(&key, stored) else {
                    break 'runs;
                };
                let block_tokens = &tokens[i * b..(i + 1) * b];
                let expect = Expect {
                    model,
                    layout,
                    hash,
                    root: Some(block_root),
                    // Only the shared form is taken from the remote tier (see `verified`).
                    salt: None,
                    tokens: Some(block_tokens),
                };
                let (data, at) = match verified(bytes, &expect, raw) {
                    Ok(v) => v,
                    Err(why) => {
                        r.tier.refuse(key, why);
                        break 'runs;
                    }
                };
                RemoteStats::add(&st.hits, 1);
                r.tier.mark_known(&hash);
                let tokens = block_tokens.to_vec();
                let root = block_root;
                r.stage(
                    hash,
                    StagedBlock {
                        root,
                        tokens,
                        data,
                        at,
                    },
                );
                staged += 1;
            }
        }
        staged
    }
}

/// A fetched value (its tag verified) checked against `expect` as the staged bytes: the value
/// itself when raw (with the payload's offset), else its decoded block; why it was refused
/// otherwise.
fn verified(value: Vec<u8>, expect: &Expect<'_>, raw: usize) -> Result<(Vec<u8>, usize), Refusal> {
    let h = match codec::check(&value, expect, raw) {
        Ok(h) if h.shared => h,
        Ok(_) => return Err(Refusal::Foreign),
        Err(e) if e.is_corrupt() => return Err(Refusal::Corrupt),
        Err(_) => return Err(Refusal::Foreign),
    };
    if h.encoding == codec::Encoding::Raw {
        let at = h.payload_offset(&value);
        return Ok((value, at));
    }
    let mut data = vec![0u8; raw];
    h.decode(&mut data).map_err(|_| Refusal::Corrupt)?;
    Ok((data, 0))
}

/// The public label the remote tier keys `salt`'s blocks by in `table`: its namespace's label
/// where that is a valid key part, else [`DEFAULT_LABEL`].
fn remote_label(table: &memoria_kv::NamespaceTable, salt: &NamespaceSalt) -> String {
    table
        .label_of_salt(salt)
        .filter(|l| keys::check_label(l).is_ok())
        .unwrap_or(DEFAULT_LABEL)
        .to_string()
}
