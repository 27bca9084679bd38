//! Where the forward pass keeps K/V: the [`KvStore`] trait (write one row, read a layer of one
//! sequence through [`KvRead`]) and a simple contiguous per-sequence implementation.
//! The shared block pool implements the same trait, so the maths never sees the layout.

use half::f16;
use memoria_kernels::ops::{KvRead, KvRow};

/// Element type of cached K/V rows (llama.cpp's `-ctk`/`-ctv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvDtype {
    F32,
    /// The default, as in llama.cpp: matches its numerics bit for bit in the attention inputs.
    F16,
}

impl KvDtype {
    /// Parses `f32` / `f16`.
    pub fn parse(s: &str) -> Option<KvDtype> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Some(KvDtype::F32),
            "f16" => Some(KvDtype::F16),
            _ => None,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            KvDtype::F32 => 4,
            KvDtype::F16 => 2,
        }
    }
}

/// K/V storage addressed by (sequence, layer, position).
pub trait KvStore: Sync {
    /// The read view of one layer of one sequence.
    type View<'a>: KvRead
    where
        Self: 'a;
    /// Stores the K and V rows (`[kv_dim]` each) of `pos`.
    fn write(&mut self, seq: usize, layer: usize, pos: usize, k: &[f32], v: &[f32]);
    /// Reads back a layer of a sequence.
    fn view(&self, seq: usize, layer: usize) -> Self::View<'_>;
    /// Positions a sequence can hold; 0 for a sequence the store does not have.
    fn capacity(&self, seq: usize) -> usize;
    /// The most positions any sequence of the store may ever reach (attention sizes its
    /// per-thread buffers for it once, so a growing context never reallocates them).
    fn max_positions(&self) -> usize;
}

#[derive(Clone, Debug)]
enum Buf {
    F32(Vec<f32>),
    F16(Vec<f16>),
}

impl Buf {
    fn new(dtype: KvDtype, len: usize) -> Buf {
        match dtype {
            KvDtype::F32 => Buf::F32(vec![0.0; len]),
            KvDtype::F16 => Buf::F16(vec![f16::ZERO; len]),
        }
    }

    fn store(&mut self, at: usize, row: &[f32]) {
        match self {
            Buf::F32(b) => b[at..at + row.len()].copy_from_slice(row),
            Buf::F16(b) => {
                for (d, &s) in b[at..at + row.len()].iter_mut().zip(row) {
                    *d = f16::from_f32(s);
                }
            }
        }
    }

    fn row(&self, at: usize, len: usize) -> KvRow<'_> {
        match self {
            Buf::F32(b) => KvRow::F32(&b[at..at + len]),
            Buf::F16(b) => KvRow::F16(&b[at..at + len]),
        }
    }
}

/// One sequence's cache: `[n_layer, capacity, kv_dim]` for K and for V.
#[derive(Clone, Debug)]
pub struct SeqCache {
    capacity: usize,
    kv_dim: usize,
    k: Buf,
    v: Buf,
}

/// Contiguous caches for a fixed set of sequences.
#[derive(Clone, Debug)]
pub struct ContiguousKv {
    n_layer: usize,
    seqs: Vec<SeqCache>,
}

impl ContiguousKv {
    /// `n_seq` sequences of up to `capacity` positions each.
    pub fn new(
        dtype: KvDtype,
        n_layer: usize,
        kv_dim: usize,
        n_seq: usize,
        capacity: usize,
    ) -> Self {
        let len = n_layer * capacity * kv_dim;
        let seqs = (0..n_seq)
            .map(|_| SeqCache {
                capacity,
                kv_dim,
                k: Buf::new(dtype, len),
                v: Buf::new(dtype, len),
            })
            .collect();
        ContiguousKv { n_layer, seqs }
    }

    /// Bytes held by K and V of all sequences.
    pub fn bytes(&self) -> usize {
        self.seqs
            .iter()
            .map(|s| {
                let per = match s.k {
                    Buf::F32(_) => 4,
                    Buf::F16(_) => 2,
                };
                2 * per * self.n_layer * s.capacity * s.kv_dim
            })
            .sum()
    }
}

/// Read view of one layer of one [`SeqCache`].
#[derive(Clone, Copy, Debug)]
pub struct SeqLayerView<'a> {
    seq: &'a SeqCache,
    base: usize,
}

impl KvRead for SeqLayerView<'_> {
    fn key(&self, pos: usize) -> KvRow<'_> {
        assert!(pos < self.seq.capacity, "kv: position {pos} past capacity");
        self.seq
            .k
            .row(self.base + pos * self.seq.kv_dim, self.seq.kv_dim)
    }
    fn value(&self, pos: usize) -> KvRow<'_> {
        assert!(pos < self.seq.capacity, "kv: position {pos} past capacity");
        self.seq
            .v
            .row(self.base + pos * self.seq.kv_dim, self.seq.kv_dim)
    }
    fn key_run(&self, pos: usize) -> (KvRow<'_>, usize) {
        assert!(pos < self.seq.capacity, "kv: position {pos} past capacity");
        let n = self.seq.capacity - pos;
        let at = self.base + pos * self.seq.kv_dim;
        (self.seq.k.row(at, n * self.seq.kv_dim), n)
    }
    fn value_run(&self, pos: usize) -> (KvRow<'_>, usize) {
        assert!(pos < self.seq.capacity, "kv: position {pos} past capacity");
        let n = self.seq.capacity - pos;
        let at = self.base + pos * self.seq.kv_dim;
        (self.seq.v.row(at, n * self.seq.kv_dim), n)
    }
}

impl KvStore for ContiguousKv {
    type View<'a> = SeqLayerView<'a>;

    fn write(&mut self, seq: usize, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let s = &mut self.seqs[seq];
        assert!(
            pos < s.capacity,
            "kv: position {pos} past capacity {}",
            s.capacity
        );
        assert!(k.len() == s.kv_dim && v.len() == s.kv_dim, "kv: row width");
        let at = (layer * s.capacity + pos) * s.kv_dim;
        s.k.store(at, k);
        s.v.store(at, v);
    }

    fn view(&self, seq: usize, layer: usize) -> SeqLayerView<'_> {
        let s = &self.seqs[seq];
        SeqLayerView {
            seq: s,
            base: layer * s.capacity * s.kv_dim,
        }
    }

    fn capacity(&self, seq: usize) -> usize {
        self.seqs.get(seq).map_or(0, |s| s.capacity)
    }

    fn max_positions(&self) -> usize {
        self.seqs.iter().map(|s| s.capacity).max().unwrap_or(0)
    }
}
