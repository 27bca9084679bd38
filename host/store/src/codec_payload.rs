//! A block's payload encodings: raw, LZ4 where it saves enough to be worth decoding, and the
//! lossy re-quantization of f16 blocks to q8_0/q4_0 (32 values per quant block), expanded back to
//! f16 on decode. Lossy encodings exist only for f16 blocks.

use memoria_kernels::GgmlType;

use super::CodecError;

/// LZ4 is kept only when it saves at least 1/this of the block: below that, decoding costs
/// more than the bytes saved (f16 K/V of many models barely compresses), so the block is raw.
pub(super) const LZ4_MIN_SAVING: usize = 16;
/// Leading bytes of a block LZ4 first tries alone (on blocks over twice this): when they do
/// not save 1/16, the block is stored raw without compressing the rest. f16 K/V rarely
/// compresses, and a whole-block attempt per write cost the writer threads (disk and remote,
/// competing with the engine for the cores) a block-sized compression for nothing.
pub(super) const LZ4_PROBE: usize = 64 << 10;

/// The LZ4 block form of `data` when it saves at least 1/[`LZ4_MIN_SAVING`] (probing the
/// leading [`LZ4_PROBE`] bytes of a large block first).
pub(super) fn lz4_if_worth(data: &[u8]) -> Option<Vec<u8>> {
    let saves = |c: &[u8], of: &[u8]| c.len() <= of.len() - of.len() / LZ4_MIN_SAVING;
    if data.len() > 2 * LZ4_PROBE {
        let probe = &data[..LZ4_PROBE];
        if !saves(&lz4_flex::block::compress(probe), probe) {
            return None;
        }
    }
    let c = lz4_flex::block::compress(data);
    saves(&c, data).then_some(c)
}

/// How the payload is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// The block's bytes as they are.
    Raw = 0,
    /// LZ4 block format of the block's bytes (lossless).
    Lz4 = 1,
    /// f16 values re-quantized to q8_0 (lossy).
    Q8_0 = 2,
    /// f16 values re-quantized to q4_0 (lossy).
    Q4_0 = 3,
}

impl Encoding {
    pub(super) fn from_code(c: u8) -> Option<Self> {
        [Self::Raw, Self::Lz4, Self::Q8_0, Self::Q4_0]
            .into_iter()
            .find(|e| *e as u8 == c)
    }

    /// Whether decoding gives back different bytes than were encoded.
    pub fn is_lossy(self) -> bool {
        matches!(self, Self::Q8_0 | Self::Q4_0)
    }

    pub(super) fn quant_type(self) -> Option<GgmlType> {
        match self {
            Self::Q8_0 => Some(GgmlType::Q8_0),
            Self::Q4_0 => Some(GgmlType::Q4_0),
            Self::Raw | Self::Lz4 => None,
        }
    }
}

pub(super) fn decode_payload(
    encoding: Encoding,
    payload: &[u8],
    out: &mut [u8],
) -> Result<(), CodecError> {
    match (encoding, encoding.quant_type()) {
        (_, Some(ty)) => dequantize_f16(payload, ty, out),
        (Encoding::Lz4, None) => {
            let n = lz4_flex::block::decompress_into(payload, out)
                .map_err(|e| CodecError::Payload(e.to_string()))?;
            if n != out.len() {
                return Err(CodecError::LengthMismatch {
                    field: "decompressed payload",
                    declared: out.len() as u64,
                    actual: n as u64,
                });
            }
            Ok(())
        }
        _ => {
            if payload.len() != out.len() {
                return Err(CodecError::LengthMismatch {
                    field: "raw payload",
                    declared: out.len() as u64,
                    actual: payload.len() as u64,
                });
            }
            out.copy_from_slice(payload);
            Ok(())
        }
    }
}

pub(super) fn quantize_f16(data: &[u8], ty: GgmlType) -> Result<Vec<u8>, CodecError> {
    let mut f = vec![0f32; data.len() / 2];
    memoria_kernels::dequantize_row(GgmlType::F16, data, &mut f)
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    let n = ty
        .row_bytes(f.len())
        .ok_or_else(|| CodecError::Encode(format!("{} values do not fit {ty:?}", f.len())))?;
    let mut q = vec![0u8; n];
    memoria_kernels::quantize_row(ty, &f, &mut q).map_err(|e| CodecError::Encode(e.to_string()))?;
    Ok(q)
}

fn dequantize_f16(payload: &[u8], ty: GgmlType, out: &mut [u8]) -> Result<(), CodecError> {
    let n = out.len() / 2;
    if ty.row_bytes(n) != Some(payload.len()) {
        return Err(CodecError::LengthMismatch {
            field: "quantized payload",
            declared: ty.row_bytes(n).unwrap_or(0) as u64,
            actual: payload.len() as u64,
        });
    }
    let mut f = vec![0f32; n];
    memoria_kernels::dequantize_row(ty, payload, &mut f)
        .map_err(|e| CodecError::Payload(e.to_string()))?;
    memoria_kernels::quantize_row(GgmlType::F16, &f, out)
        .map_err(|e| CodecError::Payload(e.to_string()))
}
