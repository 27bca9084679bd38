//! The MXFP4 expert matrices of a real gpt-oss-style GGUF (`golden/archs/gpt-oss` in the shared
//! data folder, written by gguf-py's quantizer) read back as gguf-py reads them: the FNV-1a
//! hash of each tensor's dequantized f32 values equals the hash of `gguf.quants.dequantize` on
//! it, every value lies within one MXFP4 step of the F16 copy of the same model, and matmuls
//! over them (interleaved where this CPU uses that layout) agree with the dequantized values.
//! A missing shared folder fails: this test never passes by skipping.

use std::path::PathBuf;

use memoria_kernels::matmul::Interleaved;
use memoria_kernels::quant::e8m0_to_f32_half;
use memoria_kernels::{GgmlType, WeightMatrix, dequantize_row, matmul};
use memoria_model::gguf::GgufFile;

/// `$MEMORIA_SHARED` or `../shared` beside the checkout (as the workspace tests find it).
fn shared(rel: &str) -> PathBuf {
    let dir = std::env::var_os("MEMORIA_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let p = dir.join(rel);
    assert!(
        p.is_file(),
        "shared test file missing: {} (set MEMORIA_SHARED to the shared data folder)",
        p.display()
    );
    p
}

fn fnv1a(values: &[f32]) -> u64 {
    values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// (tensor, gguf-py's dequantization hash) for every MXFP4 tensor of the file.
const EXPERTS: [(&str, u64); 6] = [
    ("blk.0.ffn_gate_exps.weight", 0x579d_6abe_e735_e628),
    ("blk.0.ffn_up_exps.weight", 0x217e_367e_19be_412c),
    ("blk.0.ffn_down_exps.weight", 0xd9a4_ba01_0a29_6efb),
    ("blk.1.ffn_gate_exps.weight", 0x1e70_de46_863a_b8df),
    ("blk.1.ffn_up_exps.weight", 0x3619_8d66_21fe_5685),
    ("blk.1.ffn_down_exps.weight", 0xaf79_ae85_3b2c_efb2),
];

#[test]
fn gpt_oss_mxfp4_experts_dequantize_like_gguf_py() {
    let mx = GgufFile::open(shared("golden/archs/gpt-oss/gpt-oss-mxfp4.gguf")).unwrap();
    let f16 = GgufFile::open(shared("golden/archs/gpt-oss/gpt-oss-f16.gguf")).unwrap();
    assert!(mx.unsupported_tensors().is_empty());
    let n_mxfp4 = mx
        .tensors()
        .iter()
        .filter(|t| t.ty == GgmlType::Mxfp4)
        .count();
    assert_eq!(n_mxfp4, EXPERTS.len(), "every MXFP4 tensor is listed");
    for (name, hash) in EXPERTS {
        let t = mx.tensor(name).unwrap();
        let reference = f16.tensor(name).unwrap();
        assert_eq!(t.ty, GgmlType::Mxfp4, "{name}");
        assert_eq!((reference.ty, &reference.dims), (GgmlType::F16, &t.dims));
        let (rows, cols) = (t.rows() as usize, t.cols() as usize);
        let data = mx.tensor_data(t);
        let mut values = vec![0.0f32; rows * cols];
        let rb = GgmlType::Mxfp4.row_bytes(cols).unwrap();
        for (row, out) in data.chunks_exact(rb).zip(values.chunks_exact_mut(cols)) {
            dequantize_row(GgmlType::Mxfp4, row, out).unwrap();
        }
        assert_eq!(fnv1a(&values), hash, "{name}");

        // Within one step of the F16 values the file was quantized from (those values rounded
        // to f16): at most 2d from the nearest code below 12d, `|x| - 12d` above.
        let mut orig = vec![0.0f32; rows * cols];
        dequantize_row(GgmlType::F16, f16.tensor_data(reference), &mut orig).unwrap();
        for ((block, vb), xb) in data
            .chunks_exact(17)
            .zip(values.chunks_exact(32))
            .zip(orig.chunks_exact(32))
        {
            let d = e8m0_to_f32_half(block[0]);
            for (v, x) in vb.iter().zip(xb) {
                let bound = (2.0 * d).max(x.abs() - 12.0 * d) * 1.01;
                assert!((v - x).abs() <= bound, "{name}: {v} vs {x} (d = {d})");
            }
        }

        // The experts as one [rows, cols] matrix through matmul, as the engine multiplies them.
        let w = WeightMatrix::new(GgmlType::Mxfp4, data, rows, cols).unwrap();
        let iw = Interleaved::build(&w);
        let w = w.with_interleaved(iw.as_ref());
        let n = 3;
        let x: Vec<f32> = (0..n * cols)
            .map(|i| ((i * 7919) % 211) as f32 / 105.0 - 1.0)
            .collect();
        let mut out = vec![0.0f32; n * rows];
        matmul(&w, &x, n, &mut out);
        for t in 0..n {
            let xt = &x[t * cols..(t + 1) * cols];
            for r in 0..rows {
                let wr = &values[r * cols..(r + 1) * cols];
                let exact: f64 = wr.iter().zip(xt).map(|(a, b)| *a as f64 * *b as f64).sum();
                let scale: f64 = wr
                    .iter()
                    .zip(xt)
                    .map(|(a, b)| (*a as f64 * *b as f64).abs())
                    .sum();
                // Q8_0 activations: about 1/254 of each product's magnitude.
                let got = out[t * rows + r] as f64;
                assert!(
                    (got - exact).abs() <= 0.01 * scale + 1e-6,
                    "{name} t={t} r={r}: {got} vs {exact}"
                );
            }
        }
    }
}
