//! The data section of a GGUF file being written: tensors given as bytes, or as a [`RowFill`]
//! run in chunks of whole rows on a producer thread while the previous chunk is written, so
//! encoding and writing overlap and memory stays bounded by a few chunks.
//!
//! Invariant: the bytes written are the same whatever the chunk size or thread timing: chunk
//! `k` of a tensor always holds its rows from `k * rows_per_chunk`, and chunks are written in
//! order.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::mpsc::sync_channel;

use super::writer::padding;

/// Encodes rows `first..first + n` of a tensor into `out`, which holds exactly `n` rows.
pub type RowFill = Arc<dyn Fn(u64, &mut [u8]) -> io::Result<()> + Send + Sync>;

/// Bytes of a fill chunk (at least one row).
const CHUNK_BYTES: usize = 32 << 20;

/// A tensor's data.
pub(super) enum TensorData {
    Bytes(Vec<u8>),
    Rows {
        size: u64,
        row_bytes: usize,
        fill: RowFill,
    },
}

impl TensorData {
    pub(super) fn size(&self) -> u64 {
        match self {
            TensorData::Bytes(b) => b.len() as u64,
            TensorData::Rows { size, .. } => *size,
        }
    }

    /// Byte lengths of the chunks a fill is run in (none for given bytes).
    fn chunks(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        let (size, row_bytes) = match self {
            TensorData::Bytes(_) => (0, 1),
            TensorData::Rows {
                size, row_bytes, ..
            } => (*size, *row_bytes),
        };
        let rows = size / row_bytes as u64;
        let per = (CHUNK_BYTES / row_bytes).max(1) as u64;
        (0..rows.div_ceil(per)).map(move |k| {
            let first = k * per;
            (first, ((rows - first).min(per) as usize) * row_bytes)
        })
    }
}

/// Writes every tensor's data, each followed by its padding to `align`; `progress` gets the
/// bytes written so far (padding included).
pub(super) fn write_data(
    w: &mut impl Write,
    tensors: &[&TensorData],
    align: u64,
    progress: &mut dyn FnMut(u64),
) -> io::Result<()> {
    let zeros = vec![0u8; align as usize];
    std::thread::scope(|s| {
        // Two chunks in flight: one being encoded, one waiting to be written.
        let (tx, rx) = sync_channel::<io::Result<Vec<u8>>>(1);
        s.spawn(move || {
            for t in tensors {
                let TensorData::Rows { fill, .. } = t else {
                    continue;
                };
                for (first, len) in t.chunks() {
                    let mut buf = vec![0u8; len];
                    let result = fill(first, &mut buf).map(|()| buf);
                    let failed = result.is_err();
                    if tx.send(result).is_err() || failed {
                        return;
                    }
                }
            }
        });
        let mut done = 0u64;
        for t in tensors {
            match t {
                TensorData::Bytes(b) => w.write_all(b)?,
                TensorData::Rows { .. } => {
                    for (_, len) in t.chunks() {
                        let chunk = rx
                            .recv()
                            .map_err(|_| io::Error::other("the tensor encoder stopped"))??;
                        debug_assert_eq!(chunk.len(), len);
                        w.write_all(&chunk)?;
                        done += chunk.len() as u64;
                        progress(done);
                    }
                }
            }
            let pad = padding(t.size(), align);
            w.write_all(&zeros[..pad])?;
            done += match t {
                TensorData::Bytes(b) => b.len() as u64 + pad as u64,
                TensorData::Rows { .. } => pad as u64,
            };
            progress(done);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use memoria_kernels::GgmlType;

    use super::super::{GgufFile, GgufWriter, MetaValue};

    /// A row of `cols` f32 values that depends only on its index.
    fn row_bytes(r: u64, cols: usize) -> Vec<u8> {
        (0..cols)
            .flat_map(|c| ((r * 7 + c as u64) as f32).to_le_bytes())
            .collect()
    }

    /// Rows filled while writing give the same file as the same bytes given up front, across
    /// chunk boundaries (a tensor of 36 MiB spans two chunks); the progress ends at the size.
    #[test]
    fn row_fills_write_the_same_bytes_as_given_data() {
        let (cols, rows) = (3 * 1024usize, 3 * 1024u64);
        let dims = [cols as u64, rows];
        let all: Vec<u8> = (0..rows).flat_map(|r| row_bytes(r, cols)).collect();
        let mut given = GgufWriter::new();
        given.set("general.architecture", MetaValue::String("x".into()));
        given
            .add_tensor("small", &[3], GgmlType::F32, vec![1; 12])
            .unwrap();
        given.add_tensor("big", &dims, GgmlType::F32, all).unwrap();
        let mut filled = GgufWriter::new();
        filled.set("general.architecture", MetaValue::String("x".into()));
        filled
            .add_tensor("small", &[3], GgmlType::F32, vec![1; 12])
            .unwrap();
        let fill: super::RowFill = Arc::new(move |first, out: &mut [u8]| {
            for (i, dst) in out.chunks_mut(cols * 4).enumerate() {
                dst.copy_from_slice(&row_bytes(first + i as u64, cols));
            }
            Ok(())
        });
        filled
            .add_tensor_rows("big", &dims, GgmlType::F32, fill)
            .unwrap();
        let bytes = filled.to_bytes();
        assert_eq!(bytes, given.to_bytes());
        assert_eq!(filled.file_size(), bytes.len() as u64);
        let f = GgufFile::from_bytes(bytes).unwrap();
        assert_eq!(f.tensor("big").unwrap().dims, dims);

        let path = std::env::temp_dir().join(format!("memoria-stream-{}.gguf", std::process::id()));
        let mut last = 0;
        filled
            .write_to_reporting(&path, &mut |n| {
                assert!(n >= last);
                last = n;
            })
            .unwrap();
        assert_eq!(last, filled.file_size());
        assert_eq!(std::fs::read(&path).unwrap(), given.to_bytes());
        std::fs::remove_file(&path).unwrap();
    }

    /// A failing fill fails the write with its error, and leaves no file behind.
    #[test]
    fn a_failing_fill_fails_the_write() {
        let mut w = GgufWriter::new();
        let fill: super::RowFill =
            Arc::new(|_, _: &mut [u8]| Err(std::io::Error::other("no rows today")));
        w.add_tensor_rows("t", &[4, 2], GgmlType::F32, fill)
            .unwrap();
        let mut sink = Vec::new();
        let err = w.write_into(&mut sink).unwrap_err();
        assert!(err.to_string().contains("no rows today"), "{err}");
        let path = std::env::temp_dir().join(format!("memoria-stream-err-{}", std::process::id()));
        assert!(w.write_to(&path).is_err());
        assert!(!path.exists());
        // Dims are checked when the tensor is added, as for given bytes.
        let fill: super::RowFill = Arc::new(|_, _: &mut [u8]| Ok(()));
        assert!(w.add_tensor_rows("q", &[31], GgmlType::Q8_0, fill).is_err());
    }
}
