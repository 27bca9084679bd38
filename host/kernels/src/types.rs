//! GGML tensor element types: ids as written in GGUF, block sizes and byte sizes per block.
//!
//! Invariant: `type_size` and `block_size` are exactly llama.cpp's `ggml_type_traits`, so a row of
//! `n` elements of type `t` occupies `t.row_bytes(n)` bytes in a GGUF file.

use std::fmt;

/// Elements per super-block of the K-quant formats (`QK_K` in ggml).
pub const QK_K: usize = 256;
/// Elements per block of Q8_0 / Q4_0 (`QK8_0`, `QK4_0` in ggml).
pub const QK8_0: usize = 32;
pub const QK4_0: usize = 32;
/// Elements per block of the other 32-element formats (`QK4_1`, `QK5_0`, `QK5_1`, `QK8_1`,
/// `QK4_NL`, `QK_MXFP4` in ggml).
pub const QK32: usize = 32;

/// The subset of ggml types memoria reads, writes and computes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    /// Activation type of Q4_1 / Q5_1 (not a weight type, like Q8_K).
    Q8_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Q8K,
    IQ4NL,
    IQ4XS,
    BF16,
    /// OCP microscaling FP4: E2M1 values with one E8M0 (power of two) scale per 32 elements.
    Mxfp4,
}

impl GgmlType {
    /// All supported types, in ggml id order.
    pub const ALL: [GgmlType; 18] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q8K,
        GgmlType::IQ4NL,
        GgmlType::IQ4XS,
        GgmlType::BF16,
        GgmlType::Mxfp4,
    ];

    /// The numeric id stored in GGUF tensor infos (`enum ggml_type`).
    pub const fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q8_1 => 9,
            GgmlType::Q2K => 10,
            GgmlType::Q3K => 11,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
            GgmlType::Q8K => 15,
            GgmlType::IQ4NL => 20,
            GgmlType::IQ4XS => 23,
            GgmlType::BF16 => 30,
            GgmlType::Mxfp4 => 39,
        }
    }

    /// Maps a GGUF type id to a supported type; `None` for ids memoria does not implement.
    pub const fn from_id(id: u32) -> Option<GgmlType> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            9 => GgmlType::Q8_1,
            10 => GgmlType::Q2K,
            11 => GgmlType::Q3K,
            12 => GgmlType::Q4K,
            13 => GgmlType::Q5K,
            14 => GgmlType::Q6K,
            15 => GgmlType::Q8K,
            20 => GgmlType::IQ4NL,
            23 => GgmlType::IQ4XS,
            30 => GgmlType::BF16,
            39 => GgmlType::Mxfp4,
            _ => return None,
        })
    }

    /// Name of a ggml type id, including the ones memoria does not implement (for error messages).
    pub const fn name_of_id(id: u32) -> &'static str {
        match id {
            0 => "f32",
            1 => "f16",
            2 => "q4_0",
            3 => "q4_1",
            6 => "q5_0",
            7 => "q5_1",
            8 => "q8_0",
            9 => "q8_1",
            10 => "q2_k",
            11 => "q3_k",
            12 => "q4_k",
            13 => "q5_k",
            14 => "q6_k",
            15 => "q8_k",
            16 => "iq2_xxs",
            17 => "iq2_xs",
            18 => "iq3_xxs",
            19 => "iq1_s",
            20 => "iq4_nl",
            21 => "iq3_s",
            22 => "iq2_s",
            23 => "iq4_xs",
            24 => "i8",
            25 => "i16",
            26 => "i32",
            27 => "i64",
            28 => "f64",
            29 => "iq1_m",
            30 => "bf16",
            39 => "mxfp4",
            _ => "unknown",
        }
    }

    /// Elements per block.
    pub const fn block_size(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Q8_1
            | GgmlType::IQ4NL
            | GgmlType::Mxfp4 => QK32,
            GgmlType::Q2K
            | GgmlType::Q3K
            | GgmlType::Q4K
            | GgmlType::Q5K
            | GgmlType::Q6K
            | GgmlType::Q8K
            | GgmlType::IQ4XS => QK_K,
        }
    }

    /// Bytes per block.
    pub const fn type_size(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q8_0 => 34,
            GgmlType::Q8_1 => 36,
            GgmlType::Q2K => 84,
            GgmlType::Q3K => 110,
            GgmlType::Q4K => 144,
            GgmlType::Q5K => 176,
            GgmlType::Q6K => 210,
            GgmlType::Q8K => 292,
            GgmlType::IQ4NL => 18,
            GgmlType::IQ4XS => 136,
            GgmlType::Mxfp4 => 17,
        }
    }

    /// Bytes taken by a row of `n` elements, or `None` if `n` is not a multiple of the block size
    /// or the size overflows.
    pub const fn row_bytes(self, n: usize) -> Option<usize> {
        if !n.is_multiple_of(self.block_size()) {
            return None;
        }
        (n / self.block_size()).checked_mul(self.type_size())
    }

    /// Lower-case name as llama.cpp prints it.
    pub const fn name(self) -> &'static str {
        Self::name_of_id(self.id())
    }

    /// Parses a name such as `q8_0`, `Q4_K`, `f16` (case-insensitive).
    pub fn parse(name: &str) -> Option<GgmlType> {
        let lower = name.to_ascii_lowercase();
        Self::ALL.into_iter().find(|t| t.name() == lower)
    }

    /// Whether `self` only exists as the activation side of a dot product (Q8_1, Q8_K): llama.cpp
    /// never stores weights in it.
    pub const fn is_activation_only(self) -> bool {
        matches!(self, GgmlType::Q8_1 | GgmlType::Q8K)
    }

    /// The type the other operand of a dot product with a row of `self` is converted to
    /// (ggml's `vec_dot_type`): activations are quantized once per matmul to this type.
    pub const fn vec_dot_type(self) -> GgmlType {
        match self {
            GgmlType::F32 => GgmlType::F32,
            GgmlType::F16 => GgmlType::F16,
            GgmlType::BF16 => GgmlType::BF16,
            GgmlType::Q4_0
            | GgmlType::Q5_0
            | GgmlType::Q8_0
            | GgmlType::IQ4NL
            | GgmlType::Mxfp4 => GgmlType::Q8_0,
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q8_1 => GgmlType::Q8_1,
            GgmlType::Q2K
            | GgmlType::Q3K
            | GgmlType::Q4K
            | GgmlType::Q5K
            | GgmlType::Q6K
            | GgmlType::Q8K
            | GgmlType::IQ4XS => GgmlType::Q8K,
        }
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sizes_match_ggml() {
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            assert_eq!(GgmlType::parse(t.name()), Some(t));
        }
        assert_eq!(GgmlType::Q8_0.row_bytes(64), Some(68));
        assert_eq!(GgmlType::Q4K.row_bytes(512), Some(288));
        assert_eq!(GgmlType::Q6K.row_bytes(100), None);
        assert_eq!(GgmlType::from_id(4), None);
        assert_eq!(GgmlType::name_of_id(3), "q4_1");
        assert_eq!(GgmlType::name_of_id(22), "iq2_s");
        // ggml_type_traits: (id, block size, type size).
        for (t, id, bs, ts) in [
            (GgmlType::Q4_1, 3, 32, 20),
            (GgmlType::Q5_0, 6, 32, 22),
            (GgmlType::Q5_1, 7, 32, 24),
            (GgmlType::Q8_1, 9, 32, 36),
            (GgmlType::Q5K, 13, 256, 176),
            (GgmlType::Q3K, 11, 256, 110),
            (GgmlType::Q2K, 10, 256, 84),
            (GgmlType::IQ4NL, 20, 32, 18),
            (GgmlType::IQ4XS, 23, 256, 136),
            (GgmlType::Mxfp4, 39, 32, 17),
        ] {
            assert_eq!((t.id(), t.block_size(), t.type_size()), (id, bs, ts), "{t}");
        }
        assert_eq!(GgmlType::Q4_1.vec_dot_type(), GgmlType::Q8_1);
        assert_eq!(GgmlType::Q5_0.vec_dot_type(), GgmlType::Q8_0);
        assert_eq!(GgmlType::IQ4NL.vec_dot_type(), GgmlType::Q8_0);
        assert_eq!(GgmlType::IQ4XS.vec_dot_type(), GgmlType::Q8K);
        assert_eq!(GgmlType::Q2K.vec_dot_type(), GgmlType::Q8K);
        assert_eq!(GgmlType::parse("IQ4_NL"), Some(GgmlType::IQ4NL));
        assert_eq!(GgmlType::Mxfp4.vec_dot_type(), GgmlType::Q8_0);
        assert_eq!(GgmlType::parse("MXFP4"), Some(GgmlType::Mxfp4));
    }
}
