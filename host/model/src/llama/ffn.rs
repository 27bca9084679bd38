//! The feed-forward half of a block: a dense gated FFN (separate or fused gate/up, optional
//! biases, SiLU, GELU or gpt-oss's clamped SwiGLU), or a mixture of experts.
//!
//! A mixture routes each token to its `n_used` experts (llama.cpp's `build_moe_ffn`: router
//! logits plus bias, softmax over all experts then top-k and renormalisation for Qwen3 MoE, or
//! top-k of the logits and a softmax over those for gpt-oss), then runs each expert once per
//! step over the tokens routed to it, gathered into one batch, so prefill and batched decode
//! read each used expert's weights once. Each token's expert outputs are weighted and summed in
//! its own choice order, and every matmul is per (row, token) pair: a token's result never
//! depends on which other tokens share its experts.

use memoria_kernels::ops::{
    add_in_place, gelu_mul_in_place, silu_mul_in_place, softmax_in_place, swiglu_oai_in_place,
};
use memoria_kernels::threads::{self, SharedMut};

use super::Model;
use super::forward::{Activations, add_bias, grow, room};
use super::hparams::{FfnAct, Gating, HParams, Moe};
use super::weights::{DenseFfn, FfnWeights, GateUp, MoeWeights};

/// Buffers of the FFN, grown on demand and reused.
#[derive(Default)]
pub(crate) struct FfnScratch {
    gate: Vec<f32>,              // [rows, n_ff]
    up: Vec<f32>,                // [rows, n_ff]
    fused: Vec<f32>,             // [rows, 2 n_ff]
    router: Vec<f32>,            // [n, n_expert]
    probs: Vec<f32>,             // [n_expert]
    chosen: Vec<u32>,            // [n, n_used] expert of each choice
    weight: Vec<f32>,            // [n, n_used] its weight
    start: Vec<usize>,           // [n_expert + 1] first entry of each expert in `order`
    order: Vec<u32>,             // [n * n_used] choices (token · n_used + slot) grouped by expert
    fill: Vec<usize>,            // [n_expert] next free entry of each expert in `order`
    active: Vec<u32>,            // experts with at least one token this step
    slots: Vec<f32>,             // [n, n_used, n_embd] weighted expert outputs
    experts: Vec<ExpertScratch>, // one per expert running at once
    act: Activations,
}

impl FfnScratch {
    /// Room for an FFN pass over `rows` tokens (see [`super::Scratch::for_rows`]).
    pub(super) fn reserve(&mut self, hp: &HParams, rows: usize) {
        let n = |width: usize| rows.saturating_mul(width);
        match &hp.moe {
            None => {
                room(&mut self.gate, n(hp.n_ff));
                room(&mut self.up, n(hp.n_ff));
                room(&mut self.fused, n(2 * hp.n_ff));
            }
            Some(m) => {
                let (ne, k) = (m.n_expert, m.n_used);
                room(&mut self.router, n(ne));
                room(&mut self.probs, ne);
                room(&mut self.chosen, n(k));
                room(&mut self.weight, n(k));
                room(&mut self.start, ne + 1);
                room(&mut self.order, n(k));
                room(&mut self.fill, ne);
                room(&mut self.active, ne);
                room(&mut self.slots, n(k).saturating_mul(hp.n_embd));
                self.act.reserve(rows, hp.n_embd);
            }
        }
    }
}

#[cfg(test)]
impl FfnScratch {
    /// Where each shared buffer lives and its capacity (experts' own buffers left out).
    pub(super) fn footprint(&self, out: &mut Vec<(usize, usize)>) {
        use super::forward::at;
        out.extend([
            at(&self.gate),
            at(&self.up),
            at(&self.fused),
            at(&self.router),
            at(&self.probs),
            at(&self.chosen),
            at(&self.weight),
            at(&self.start),
            at(&self.order),
            at(&self.fill),
            at(&self.active),
            at(&self.slots),
            self.act.footprint(),
        ]);
    }
}

/// The buffers one expert's FFN runs in.
#[derive(Default)]
struct ExpertScratch {
    xe: Vec<f32>,   // [m, n_embd] gathered inputs
    gate: Vec<f32>, // [m, n_ff]
    up: Vec<f32>,   // [m, n_ff]
    ye: Vec<f32>,   // [m, n_embd] outputs
    act: Activations,
}

/// Below this many experts in use a step runs them one after another, each matmul split over
/// the pool by rows; from it on the experts themselves are the pool's tasks (decode: many
/// small matrices, one dispatch instead of three per expert). Results are the same bits
/// either way: every matmul is per (row, token) pair.
const EXPERTS_PER_THREAD: usize = 2;

/// `gate = act(gate) ⊙ up`.
fn activate(act: FfnAct, gate: &mut [f32], up: &[f32]) {
    match act {
        FfnAct::Silu => silu_mul_in_place(gate, up),
        FfnAct::GeluTanh => gelu_mul_in_place(gate, up),
        FfnAct::SwigluOai => swiglu_oai_in_place(gate, up),
    }
}

impl Model {
    /// `out[n, n_embd] = ffn(x[n, n_embd])`; `act` holds `x` quantized for the first matrix.
    pub(super) fn ffn(
        &self,
        w: &FfnWeights,
        x: &[f32],
        n: usize,
        s: &mut FfnScratch,
        act: &mut Activations,
        out: &mut [f32],
    ) {
        match (w, &self.hparams.moe) {
            (FfnWeights::Dense(dense), _) => self.dense(dense, x, n, s, act, out),
            (FfnWeights::Moe(m), Some(spec)) => self.mixture(m, spec, x, n, s, out),
            (FfnWeights::Moe(_), None) => unreachable!("experts are loaded only for MoE models"),
        }
    }

    fn dense(
        &self,
        w: &DenseFfn,
        x: &[f32],
        n: usize,
        s: &mut FfnScratch,
        act: &mut Activations,
        out: &mut [f32],
    ) {
        let ff = self.hparams.n_ff;
        let file = &self.file;
        let gate = grow(&mut s.gate, n * ff);
        let up = grow(&mut s.up, n * ff);
        match &w.gate_up {
            GateUp::Split { gate: wg, up: wu } => {
                act.project(&wg.view(file), x, n, gate);
                act.project(&wu.view(file), x, n, up);
            }
            GateUp::Fused(wgu) => {
                let fused = grow(&mut s.fused, n * 2 * ff);
                act.project(&wgu.view(file), x, n, fused);
                for (i, row) in fused.chunks_exact(2 * ff).enumerate() {
                    gate[i * ff..(i + 1) * ff].copy_from_slice(&row[..ff]);
                    up[i * ff..(i + 1) * ff].copy_from_slice(&row[ff..]);
                }
            }
        }
        add_bias(gate, w.b_gate.as_deref());
        add_bias(up, w.b_up.as_deref());
        activate(self.hparams.ffn_act, gate, up);
        act.invalidate();
        act.project(&w.down.view(file), gate, n, out);
        add_bias(out, w.b_down.as_deref());
        act.invalidate();
    }

    fn mixture(
        &self,
        w: &MoeWeights,
        spec: &Moe,
        x: &[f32],
        n: usize,
        s: &mut FfnScratch,
        out: &mut [f32],
    ) {
        let (d, ff, ne, k) = (self.hparams.n_embd, spec.n_ff, spec.n_expert, spec.n_used);
        let file = &self.file;
        let mut router = std::mem::take(&mut s.router);
        let logits = grow(&mut router, n * ne);
        s.act.invalidate();
        s.act.project(&w.router.view(file), x, n, logits);
        add_bias(logits, w.router_bias.as_deref());
        route(spec, logits, n, s);
        s.router = router;
        s.active.clear();
        s.active
            .extend((0..ne as u32).filter(|&e| s.start[e as usize + 1] > s.start[e as usize]));
        let slots = SharedMut::new(grow(&mut s.slots, n * k * d));
        let job = Expert {
            w,
            ff,
            d,
            x,
            order: &s.order,
            start: &s.start,
            weight: &s.weight,
            k,
            slots,
        };
        let parallel = s.active.len() >= EXPERTS_PER_THREAD * threads::current_threads();
        let running = if parallel { s.active.len() } else { 1 };
        if s.experts.len() < running {
            s.experts.resize_with(running, ExpertScratch::default);
        }
        if parallel {
            let active = &s.active;
            threads::for_each_chunk_mut(&mut s.experts[..running], 1, |i, sc| {
                self.run_expert(&job, active[i] as usize, &mut sc[0]);
            });
        } else {
            for &e in &s.active {
                self.run_expert(&job, e as usize, &mut s.experts[0]);
            }
        }
        let slots = &s.slots[..n * k * d];
        s.act.invalidate();
        // ggml adds the weighted experts of a token in its choice order.
        for (o, t) in out.chunks_exact_mut(d).zip(slots.chunks_exact(k * d)) {
            o.copy_from_slice(&t[..d]);
            for slot in t[d..].chunks_exact(d) {
                add_in_place(o, slot);
            }
        }
    }
}

/// What every expert of a step reads, and where it writes its weighted outputs.
struct Expert<'a> {
    w: &'a MoeWeights,
    ff: usize,
    d: usize,
    /// The step's FFN inputs, `[n, n_embd]`.
    x: &'a [f32],
    order: &'a [u32],
    start: &'a [usize],
    weight: &'a [f32],
    k: usize,
    /// `[n, n_used, n_embd]`: choice `c`'s row is written by its expert only.
    slots: SharedMut<'a, f32>,
}

impl Model {
    /// Expert `e` over the tokens routed to it: gathered inputs, gate and up, activation, down,
    /// each output row times its choice's weight into that choice's slot.
    fn run_expert(&self, job: &Expert, e: usize, sc: &mut ExpertScratch) {
        let (w, ff, d, k) = (job.w, job.ff, job.d, job.k);
        let file = &self.file;
        let entries = &job.order[job.start[e]..job.start[e + 1]];
        let m = entries.len();
        let xe = grow(&mut sc.xe, m * d);
        for (dst, &c) in xe.chunks_exact_mut(d).zip(entries) {
            let t = c as usize / k;
            dst.copy_from_slice(&job.x[t * d..(t + 1) * d]);
        }
        let gate = grow(&mut sc.gate, m * ff);
        let up = grow(&mut sc.up, m * ff);
        sc.act.invalidate();
        sc.act.project(&w.gate[e].view(file), xe, m, gate);
        sc.act.project(&w.up[e].view(file), xe, m, up);
        add_bias(gate, expert_row(w.b_gate.as_deref(), e, ff));
        add_bias(up, expert_row(w.b_up.as_deref(), e, ff));
        activate(self.hparams.ffn_act, gate, up);
        let ye = grow(&mut sc.ye, m * d);
        sc.act.invalidate();
        sc.act.project(&w.down[e].view(file), gate, m, ye);
        add_bias(ye, expert_row(w.b_down.as_deref(), e, d));
        sc.act.invalidate();
        for (yr, &c) in ye.chunks_exact(d).zip(entries) {
            let c = c as usize;
            let wt = job.weight[c];
            // SAFETY: choice `c` belongs to expert `e` alone, and each expert runs once a step.
            let slot = unsafe { job.slots.slice(c * d, d) };
            for (o, &v) in slot.iter_mut().zip(yr) {
                *o = v * wt;
            }
        }
    }
}

/// Expert `e`'s row of a per-expert bias table.
fn expert_row(table: Option<&[f32]>, e: usize, len: usize) -> Option<&[f32]> {
    table.map(|t| &t[e * len..(e + 1) * len])
}

/// Chooses each token's experts and weights from its router logits (`[n, n_expert]`) and
/// groups the choices by expert (`s.start`, `s.order`).
fn route(spec: &Moe, logits: &[f32], n: usize, s: &mut FfnScratch) {
    let (ne, k) = (spec.n_expert, spec.n_used);
    let chosen = grow(&mut s.chosen, n * k);
    let weight = grow(&mut s.weight, n * k);
    let probs = grow(&mut s.probs, ne);
    for ((row, ch), wt) in logits
        .chunks_exact(ne)
        .zip(chosen.chunks_exact_mut(k))
        .zip(weight.chunks_exact_mut(k))
    {
        probs.copy_from_slice(row);
        if spec.gating == Gating::SoftmaxAll {
            softmax_in_place(probs);
        }
        top_k(probs, ch);
        for (w, &e) in wt.iter_mut().zip(ch.iter()) {
            *w = probs[e as usize];
        }
        if spec.gating == Gating::SoftmaxChosen {
            softmax_in_place(wt);
        }
        if spec.normalize {
            // ggml_sum_rows sums in double; the clamp (f16's smallest normal, 2^-14) keeps a
            // zero sum from dividing.
            let sum = wt.iter().map(|&v| f64::from(v)).sum::<f64>() as f32;
            let sum = sum.max(1.0 / 16384.0);
            for w in wt.iter_mut() {
                *w /= sum;
            }
        }
        if spec.weights_scale != 1.0 {
            for w in wt.iter_mut() {
                *w *= spec.weights_scale;
            }
        }
    }
    // Counting sort of the choices by expert, token order kept within each expert.
    let start = grow(&mut s.start, ne + 1);
    start.fill(0);
    for &e in chosen.iter() {
        start[e as usize + 1] += 1;
    }
    for e in 0..ne {
        start[e + 1] += start[e];
    }
    let order = grow(&mut s.order, n * k);
    let fill = grow(&mut s.fill, ne);
    fill.copy_from_slice(&start[..ne]);
    for (c, &e) in chosen.iter().enumerate() {
        let at = &mut fill[e as usize];
        order[*at] = c as u32;
        *at += 1;
    }
}

/// The indices of the `out.len()` largest values of `v`, largest first (ties: lower index
/// first).
fn top_k(v: &[f32], out: &mut [u32]) {
    let mut n = 0;
    for (i, &x) in v.iter().enumerate() {
        // Insertion into the sorted prefix; a NaN never displaces a number.
        let mut at = n;
        while at > 0 && x > v[out[at - 1] as usize] {
            at -= 1;
        }
        if at < out.len() {
            let end = n.min(out.len() - 1);
            out.copy_within(at..end, at + 1);
            out[at] = i as u32;
            n = (n + 1).min(out.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::top_k;

    #[test]
    fn top_k_orders_by_value_then_index() {
        let v = [0.1f32, 0.9, 0.5, 0.9, -1.0, 0.7];
        let mut out = [0u32; 3];
        top_k(&v, &mut out);
        assert_eq!(out, [1, 3, 5]);
        let mut one = [0u32; 1];
        top_k(&v, &mut one);
        assert_eq!(one, [1]);
        let mut all = [0u32; 6];
        top_k(&v, &mut all);
        assert_eq!(all, [1, 3, 5, 2, 0, 4]);
    }
}
