//! The namespace registry: one immutable [`NamespaceTable`] of every namespace a host serves
//! (id, public label, K/V salt, eviction priority, block cap), registered with the engine at
//! start and swapped whole on a configuration reload. Invariants: it is the only holder of a
//! namespace's salt on the host; everything else (engine commands, saves, tier demotions,
//! remote prefetches, embedding keys) names a namespace by [`NamespaceId`] and looks its salt
//! up here. Readers take a snapshot without locking ([`Namespaces::snapshot`]); a salt is never
//! formatted (its `Debug` is redacted) and never leaves the host.
//!
//! What is derived from a salt is worked out here too: a namespace's chain root for the model
//! the registry is bound to ([`Namespaces::bind`]) is computed once, when its entry is registered
//! (or when the registry is bound), and read by [`Namespaces::root`]; a root for any other model
//! shape is derived on request, here as well.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::{
    BlockHash, KvElem, KvLayout, ModelFingerprint, NamespaceId, NamespaceSalt, PublicChain,
};

/// What a chain root depends on besides the salt: the model, and the element type and size of
/// its K/V blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootShape {
    pub model: ModelFingerprint,
    pub elem: KvElem,
    pub block_tokens: usize,
}

impl RootShape {
    /// The shape of `model`'s blocks cut by `layout`.
    pub fn new(model: ModelFingerprint, layout: &KvLayout) -> Self {
        RootShape {
            model,
            elem: layout.elem,
            block_tokens: layout.block_tokens,
        }
    }

    fn root(&self, salt: &NamespaceSalt) -> BlockHash {
        BlockHash::root(&self.model, self.elem, self.block_tokens, salt)
    }
}

/// One registered namespace.
#[derive(Clone, PartialEq, Eq)]
pub struct NamespaceEntry {
    /// The host's number for the namespace (stable across reloads).
    pub id: NamespaceId,
    /// Its public label (remote keys, events): `shared`, the isolated namespace's name or
    /// `group.NAME`; never secret.
    pub label: String,
    salt: NamespaceSalt,
    /// The chain root under the table's bound shape (`None` while unbound).
    root: Option<BlockHash>,
    /// Eviction priority of its cached blocks (higher stays longer).
    pub priority: i32,
    /// Most hot blocks it may hold (`None`: no cap).
    pub max_blocks: Option<usize>,
}

impl NamespaceEntry {
    /// A namespace keyed with `salt`, priority 0 and no block cap.
    pub fn new(id: NamespaceId, label: impl Into<String>, salt: NamespaceSalt) -> Self {
        NamespaceEntry {
            id,
            label: label.into(),
            salt,
            root: None,
            priority: 0,
            max_blocks: None,
        }
    }

    /// The same entry with an eviction priority and block cap.
    pub fn with_policy(self, priority: i32, max_blocks: Option<usize>) -> Self {
        NamespaceEntry {
            priority,
            max_blocks,
            ..self
        }
    }

    /// The K/V hash salt (for the chain root and stored blocks' identity only).
    pub fn salt(&self) -> &NamespaceSalt {
        &self.salt
    }
}

impl fmt::Debug for NamespaceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceEntry")
            .field("id", &self.id)
            .field("label", &self.label)
            .field("priority", &self.priority)
            .field("max_blocks", &self.max_blocks)
            .finish_non_exhaustive()
    }
}

/// The first id (the smallest) of each salt's namespaces.
fn salt_index(by_id: &BTreeMap<NamespaceId, NamespaceEntry>) -> BTreeMap<[u8; 32], NamespaceId> {
    let mut index = BTreeMap::new();
    for e in by_id.values() {
        index.entry(e.salt.0).or_insert(e.id);
    }
    index
}

/// The salt of each root computed for the bound shape (the common salt's too).
fn root_index(t: &NamespaceTable) -> BTreeMap<[u8; 32], NamespaceSalt> {
    let entries = t.by_id.values().filter_map(|e| Some((e.root?.0, e.salt)));
    let common = t
        .bound
        .and_then(|(_, root)| Some((root?.0, t.common?)))
        .into_iter();
    entries.chain(common).collect()
}

/// Every namespace of a host at one moment, plus the common salt public prefixes are keyed
/// under. Immutable; a reload builds a new one.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NamespaceTable {
    common: Option<NamespaceSalt>,
    by_id: BTreeMap<NamespaceId, NamespaceEntry>,
    /// The first namespace (by id) keyed with each salt: the remote label of a block's salt is
    /// found here without a scan.
    by_salt: BTreeMap<[u8; 32], NamespaceId>,
    /// The model shape the roots below are computed for, and the common salt's root.
    bound: Option<(RootShape, Option<BlockHash>)>,
    /// Under the bound shape, the salt of each root (the common salt's included).
    by_root: BTreeMap<[u8; 32], NamespaceSalt>,
}

impl NamespaceTable {
    /// A table of `entries` (a later entry with the same id replaces an earlier one); `common`
    /// keys public prefixes' blocks (`None`: public prefixes cannot be used).
    pub fn new(
        common: Option<NamespaceSalt>,
        entries: impl IntoIterator<Item = NamespaceEntry>,
    ) -> Self {
        let by_id: BTreeMap<NamespaceId, NamespaceEntry> =
            entries.into_iter().map(|e| (e.id, e)).collect();
        NamespaceTable {
            common,
            by_salt: salt_index(&by_id),
            by_id,
            bound: None,
            by_root: BTreeMap::new(),
        }
    }

    /// This table with `entry` added (or replacing the entry with its id).
    pub fn with(&self, mut entry: NamespaceEntry) -> Self {
        let mut t = self.clone();
        entry.root = t.bound.map(|(shape, _)| shape.root(&entry.salt));
        t.by_id.insert(entry.id, entry);
        t.by_salt = salt_index(&t.by_id);
        t.by_root = root_index(&t);
        t
    }

    /// This table with every chain root computed for `shape` (`None`: none kept).
    fn bound_to(mut self, shape: Option<RootShape>) -> Self {
        self.bound = shape.map(|s| (s, self.common.map(|c| s.root(&c))));
        for e in self.by_id.values_mut() {
            e.root = shape.map(|s| s.root(&e.salt));
        }
        self.by_root = root_index(&self);
        self
    }

    /// The chain root of the namespaces keyed with `salt` (or the common salt) for `shape`: the
    /// one computed at registration when `shape` is the bound one, else derived now. What the
    /// store writes in a shared-form value in the salt's place.
    pub fn root_of_salt(&self, salt: &NamespaceSalt, shape: &RootShape) -> BlockHash {
        if let Some((_, common_root)) = self.bound.filter(|(s, _)| s == shape) {
            let entry = self.by_salt.get(&salt.0).and_then(|id| self.by_id.get(id));
            if let Some(root) = entry.and_then(|e| e.root) {
                return root;
            }
            if self.common == Some(*salt)
                && let Some(root) = common_root
            {
                return root;
            }
        }
        shape.root(salt)
    }

    /// The salt whose chain root for `shape` is `root`: a namespace's or the common salt
    /// (`None`: no registered salt gives it). What a host-form stored value must carry to be
    /// read by a chain from `root`. A look-up for the bound shape; derived per entry for
    /// another (tools and tests).
    pub fn salt_of_root(&self, root: &BlockHash, shape: &RootShape) -> Option<NamespaceSalt> {
        if self.bound.is_some_and(|(s, _)| s == *shape) {
            return self.by_root.get(&root.0).copied();
        }
        let mut salts = self.by_id.values().map(|e| e.salt).chain(self.common);
        salts.find(|s| shape.root(s) == *root)
    }

    /// The chain root of namespace `id` for `shape` ([`PublicChain::OWNER`]: the common salt's):
    /// the one computed at registration when `shape` is the bound one, else derived now.
    pub fn root(&self, id: NamespaceId, shape: &RootShape) -> Option<BlockHash> {
        let bound = self.bound.filter(|(s, _)| s == shape);
        if id == PublicChain::OWNER {
            return match bound {
                Some((_, common)) => common,
                None => self.common.map(|c| shape.root(&c)),
            };
        }
        let e = self.by_id.get(&id)?;
        match (bound, e.root) {
            (Some(_), Some(root)) => Some(root),
            _ => Some(shape.root(&e.salt)),
        }
    }

    /// The namespace numbered `id`.
    pub fn get(&self, id: NamespaceId) -> Option<&NamespaceEntry> {
        self.by_id.get(&id)
    }

    /// The salt of namespace `id`; [`PublicChain::OWNER`] (public prefixes' blocks) has the
    /// common salt.
    pub fn salt(&self, id: NamespaceId) -> Option<NamespaceSalt> {
        if id == PublicChain::OWNER {
            return self.common;
        }
        self.by_id.get(&id).map(|e| e.salt)
    }

    /// The salt public prefixes' blocks are keyed under.
    pub fn common_salt(&self) -> Option<NamespaceSalt> {
        self.common
    }

    /// The public label of the namespaces keyed with `salt` (they share one: a salt is shared
    /// only by `shared` namespaces or by one group's); the first by id wins.
    pub fn label_of_salt(&self, salt: &NamespaceSalt) -> Option<&str> {
        let id = self.by_salt.get(&salt.0)?;
        self.by_id.get(id).map(|e| e.label.as_str())
    }

    /// Every entry, by id.
    pub fn iter(&self) -> impl Iterator<Item = &NamespaceEntry> {
        self.by_id.values()
    }

    /// Number of namespaces.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no namespace is registered.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

impl fmt::Debug for NamespaceTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.by_id.values()).finish()
    }
}

/// The registry: the current [`NamespaceTable`], shared by the engine, its handle and the tier
/// stack. Reads are lock-free snapshots; [`Namespaces::register`] swaps in a new table.
#[derive(Default)]
pub struct Namespaces {
    current: ArcSwap<NamespaceTable>,
}

impl Namespaces {
    /// A registry holding `table`.
    pub fn new(table: NamespaceTable) -> Self {
        Namespaces {
            current: ArcSwap::from_pointee(table),
        }
    }

    /// The current table.
    pub fn snapshot(&self) -> Arc<NamespaceTable> {
        self.current.load_full()
    }

    /// Replaces the table (start-up and every configuration reload); its roots are computed
    /// for the shape the registry is bound to.
    pub fn register(&self, table: NamespaceTable) {
        self.current
            .rcu(|cur| table.clone().bound_to(cur.bound.map(|(s, _)| s)));
    }

    /// Binds the registry to one model shape (the engine's, at its start): every namespace's
    /// chain root for it is computed now and on every later registration.
    pub fn bind(&self, shape: RootShape) {
        self.current.rcu(|t| (**t).clone().bound_to(Some(shape)));
    }

    /// The chain root of namespace `id` for `shape` in the current table (see
    /// [`NamespaceTable::root`]).
    pub fn root(&self, id: NamespaceId, shape: &RootShape) -> Option<BlockHash> {
        self.current.load().root(id, shape)
    }

    /// The common salt's chain root for `shape` (public prefixes' blocks).
    pub fn common_root(&self, shape: &RootShape) -> Option<BlockHash> {
        self.root(PublicChain::OWNER, shape)
    }

    /// Adds or replaces one entry (callers that serve a fixed namespace: `memoria run`, tests).
    pub fn insert(&self, entry: NamespaceEntry) {
        self.current.rcu(|t| t.with(entry.clone()));
    }

    /// The salt of namespace `id` in the current table.
    pub fn salt(&self, id: NamespaceId) -> Option<NamespaceSalt> {
        self.current.load().salt(id)
    }

    /// The common salt in the current table.
    pub fn common_salt(&self) -> Option<NamespaceSalt> {
        self.current.load().common_salt()
    }
}

impl fmt::Debug for Namespaces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Namespaces")
            .field(&*self.current.load())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u32, label: &str) -> NamespaceEntry {
        NamespaceEntry::new(NamespaceId(id), label, NamespaceSalt::derive(label))
    }

    #[test]
    fn salts_are_looked_up_by_id_and_swapped_whole() {
        let common = NamespaceSalt::derive("common");
        let reg = Namespaces::new(NamespaceTable::new(
            Some(common),
            [entry(1, "a"), entry(2, "b")],
        ));
        assert_eq!(reg.salt(NamespaceId(1)), Some(NamespaceSalt::derive("a")));
        assert_eq!(reg.salt(PublicChain::OWNER), Some(common));
        assert_eq!(reg.salt(NamespaceId(3)), None);
        let before = reg.snapshot();
        reg.register(NamespaceTable::new(Some(common), [entry(3, "c")]));
        assert_eq!(reg.salt(NamespaceId(1)), None);
        assert_eq!(
            before.salt(NamespaceId(1)),
            Some(NamespaceSalt::derive("a"))
        );
        reg.insert(entry(4, "d").with_policy(5, Some(10)));
        let t = reg.snapshot();
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(NamespaceId(4)).map(|e| e.priority), Some(5));
        assert_eq!(t.label_of_salt(&NamespaceSalt::derive("c")), Some("c"));
        // Namespaces sharing a salt share the first one's label; a replaced entry leaves it.
        let shared = |id, label| NamespaceEntry::new(NamespaceId(id), label, common);
        let t = NamespaceTable::new(None, [shared(7, "late"), shared(5, "early")]);
        assert_eq!(t.label_of_salt(&common), Some("early"));
        let t = t.with(entry(5, "moved"));
        assert_eq!(t.label_of_salt(&common), Some("late"));
        assert_eq!(
            t.label_of_salt(&NamespaceSalt::derive("moved")),
            Some("moved")
        );
        assert_eq!(t.label_of_salt(&NamespaceSalt::derive("none")), None);
    }

    /// A model shape and one that differs from it in block size only.
    fn two_shapes() -> (RootShape, RootShape) {
        let shape = RootShape {
            model: ModelFingerprint([7; 32]),
            elem: KvElem::F16,
            block_tokens: 16,
        };
        let other = RootShape {
            block_tokens: 32,
            ..shape
        };
        (shape, other)
    }

    #[test]
    fn roots_are_computed_at_registration_for_the_bound_shape() {
        let (shape, other) = two_shapes();
        let want = |s: &RootShape, label: &str| {
            BlockHash::root(
                &s.model,
                s.elem,
                s.block_tokens,
                &NamespaceSalt::derive(label),
            )
        };
        let common = NamespaceSalt::derive("common");
        let reg = Namespaces::new(NamespaceTable::new(Some(common), [entry(1, "a")]));
        assert_eq!(reg.root(NamespaceId(1), &shape), Some(want(&shape, "a")));
        reg.bind(shape);
        assert_eq!(
            reg.snapshot().get(NamespaceId(1)).and_then(|e| e.root),
            Some(want(&shape, "a"))
        );
        reg.insert(entry(2, "b"));
        assert_eq!(
            reg.snapshot().get(NamespaceId(2)).and_then(|e| e.root),
            Some(want(&shape, "b"))
        );
        reg.register(NamespaceTable::new(Some(common), [entry(3, "c")]));
        assert_eq!(
            reg.snapshot().get(NamespaceId(3)).and_then(|e| e.root),
            Some(want(&shape, "c"))
        );
        assert_eq!(reg.root(NamespaceId(3), &shape), Some(want(&shape, "c")));
        assert_eq!(reg.root(NamespaceId(3), &other), Some(want(&other, "c")));
        assert_eq!(reg.common_root(&shape), Some(want(&shape, "common")));
        assert_eq!(reg.common_root(&other), Some(want(&other, "common")));
        assert_eq!(reg.root(NamespaceId(1), &shape), None);
    }

    #[test]
    fn roots_and_salts_are_looked_up_both_ways_bound_or_not() {
        let (shape, other) = two_shapes();
        let salt = |label: &str| NamespaceSalt::derive(label);
        let derived = |s: &RootShape, label: &str| s.root(&salt(label));
        let common = salt("common");
        let table = NamespaceTable::new(Some(common), [entry(1, "a"), entry(2, "b")]);
        let reg = Namespaces::new(table);
        for bound in [false, true] {
            if bound {
                reg.bind(shape);
            }
            let t = reg.snapshot();
            for (label, s) in [
                ("a", &shape),
                ("b", &shape),
                ("common", &shape),
                ("a", &other),
            ] {
                let root = derived(s, label);
                assert_eq!(
                    t.root_of_salt(&salt(label), s),
                    root,
                    "{label} bound={bound}"
                );
                assert_eq!(t.salt_of_root(&root, s), Some(salt(label)), "{label}");
            }
            // A root no registered salt gives, or a root under another shape, names no salt.
            assert_eq!(t.salt_of_root(&derived(&shape, "z"), &shape), None);
            assert_eq!(t.salt_of_root(&derived(&other, "a"), &shape), None);
            // An unregistered salt's root is still its own (tools, a namespace just removed).
            assert_eq!(t.root_of_salt(&salt("z"), &shape), derived(&shape, "z"));
        }
        // A reload keeps the look-ups in step: a removed namespace's root names nothing.
        reg.register(NamespaceTable::new(Some(common), [entry(2, "b")]));
        let t = reg.snapshot();
        assert_eq!(t.salt_of_root(&derived(&shape, "a"), &shape), None);
        assert_eq!(
            t.salt_of_root(&derived(&shape, "b"), &shape),
            Some(salt("b"))
        );
    }

    #[test]
    fn debug_output_never_shows_a_salt() {
        let salt = NamespaceSalt::derive("secret");
        let t = NamespaceTable::new(Some(salt), [NamespaceEntry::new(NamespaceId(1), "x", salt)]);
        let text = format!("{t:?} {:?} {salt:?}", Namespaces::new(t.clone()));
        assert_eq!(format!("{salt:?}"), "NamespaceSalt(..)");
        assert!(!text.contains(&format!("{:?}", salt.0)), "{text}");
        assert!(text.contains("\"x\""));
    }
}
