//! The model's view of the shared block pool: implements [`KvStore`] for the sequences of one
//! engine step. Position `p` of a sequence lives in block `table[p / B]`, slot `p % B`; writes
//! go only to slots the pool reserved for this step (exclusively owned, unsealed blocks), reads
//! follow each sequence's own block table, so attention cost is proportional to its own length.
//! The tables are read from the pool itself (borrowed, not copied), so a step builds nothing.

use half::f16;
use memoria_kernels::GgmlType;
use memoria_kernels::ops::{KvRead, KvRow};
use memoria_kernels::quant::quantize_row;
use memoria_kv::{BlockId, BlockPool, KvElem, KvPart, SeqId};
use memoria_model::llama::KvStore;

/// The step's sequences (batch `seq` index → pool sequence) over the pool.
pub struct PagedKv<'p> {
    pool: &'p mut BlockPool,
    seqs: &'p [SeqId],
    /// The longest context a session may hold.
    max_context: usize,
}

impl<'p> PagedKv<'p> {
    /// `seqs[i]` is the batch's sequence `i`; its block table must already cover every
    /// position the step writes (the pool reserved them). No sequence grows past
    /// `max_context` positions.
    pub fn new(pool: &'p mut BlockPool, seqs: &'p [SeqId], max_context: usize) -> Self {
        PagedKv {
            pool,
            seqs,
            max_context,
        }
    }

    /// Batch sequence `seq`'s block table (empty for an unknown one: no capacity, so the
    /// model refuses to write there).
    fn table(&self, seq: usize) -> &[BlockId] {
        self.seqs
            .get(seq)
            .and_then(|&s| self.pool.block_table(s).ok())
            .unwrap_or_default()
    }
}

/// Converts an f32 row to the pool's element type, in place in `dst`.
fn store_row(elem: KvElem, src: &[f32], dst: &mut [u8]) {
    match elem {
        KvElem::F32 => dst.copy_from_slice(bytemuck::cast_slice(src)),
        KvElem::F16 => {
            let out: &mut [f16] = bytemuck::cast_slice_mut(dst);
            for (d, &s) in out.iter_mut().zip(src) {
                *d = f16::from_f32(s);
            }
        }
        KvElem::Q8_0 => quantize_row(GgmlType::Q8_0, src, dst).expect("kv row size"),
        KvElem::Q4_0 => quantize_row(GgmlType::Q4_0, src, dst).expect("kv row size"),
    }
}

fn load_row(elem: KvElem, bytes: &[u8]) -> KvRow<'_> {
    match elem {
        KvElem::F32 => KvRow::F32(bytemuck::cast_slice(bytes)),
        KvElem::F16 => KvRow::F16(bytemuck::cast_slice(bytes)),
        KvElem::Q8_0 => KvRow::Q8_0(bytes),
        KvElem::Q4_0 => KvRow::Q4_0(bytes),
    }
}

/// One layer of one sequence, read through its block table.
pub struct PagedView<'a> {
    pool: &'a BlockPool,
    table: &'a [BlockId],
    layer: usize,
    block_tokens: usize,
    elem: KvElem,
}

impl PagedView<'_> {
    fn read(&self, pos: usize, part: KvPart) -> KvRow<'_> {
        let block = self.table[pos / self.block_tokens];
        load_row(
            self.elem,
            self.pool
                .row(block, self.layer, part, pos % self.block_tokens),
        )
    }
}

impl PagedView<'_> {
    /// The rest of `pos`'s block: rows `pos..` up to the block's end, contiguous.
    fn run(&self, pos: usize, part: KvPart) -> (KvRow<'_>, usize) {
        let (block, slot) = (self.table[pos / self.block_tokens], pos % self.block_tokens);
        let n = self.block_tokens - slot;
        (
            load_row(self.elem, self.pool.rows(block, self.layer, part, slot, n)),
            n,
        )
    }
}

impl KvRead for PagedView<'_> {
    fn key(&self, pos: usize) -> KvRow<'_> {
        self.read(pos, KvPart::K)
    }
    fn value(&self, pos: usize) -> KvRow<'_> {
        self.read(pos, KvPart::V)
    }
    fn key_run(&self, pos: usize) -> (KvRow<'_>, usize) {
        self.run(pos, KvPart::K)
    }
    fn value_run(&self, pos: usize) -> (KvRow<'_>, usize) {
        self.run(pos, KvPart::V)
    }
}

impl KvStore for PagedKv<'_> {
    type View<'a>
        = PagedView<'a>
    where
        Self: 'a;

    fn write(&mut self, seq: usize, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let layout = *self.pool.layout();
        let b = layout.block_tokens;
        let block = self.table(seq)[pos / b];
        store_row(
            layout.elem,
            k,
            self.pool.row_mut(block, layer, KvPart::K, pos % b),
        );
        store_row(
            layout.elem,
            v,
            self.pool.row_mut(block, layer, KvPart::V, pos % b),
        );
    }

    fn view(&self, seq: usize, layer: usize) -> PagedView<'_> {
        let layout = self.pool.layout();
        PagedView {
            pool: self.pool,
            table: self.table(seq),
            layer,
            block_tokens: layout.block_tokens,
            elem: layout.elem,
        }
    }

    fn capacity(&self, seq: usize) -> usize {
        self.table(seq).len() * self.pool.layout().block_tokens
    }

    fn max_positions(&self) -> usize {
        self.max_context
    }
}
