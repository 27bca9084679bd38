//! `GgufFile`: an opened GGUF file (memory-mapped or in memory) with typed metadata lookups and
//! zero-copy access to tensor data.
//!
//! Invariant: a `GgufFile` only exists for a buffer that `reader::parse` fully validated, so
//! every `TensorInfo` it hands out addresses bytes inside the buffer.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use super::error::GgufError;
use super::reader::{Parsed, parse};
use super::tensor::{TensorInfo, UnsupportedTensor};
use super::value::{MetaArray, MetaValue};

enum Backing {
    Mmap(Mmap),
    Bytes(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mmap(m) => m,
            Backing::Bytes(v) => v,
        }
    }
}

/// Told the byte length of each tensor released.
type ReleaseObserver = Box<dyn Fn(u64) + Send + Sync>;

/// A validated GGUF file. Weights are used in place from the mapping.
pub struct GgufFile {
    backing: Backing,
    /// The opened file behind a mapping, read again (not through the mapping) by
    /// [`GgufFile::content_hash`].
    file: Option<File>,
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, MetaValue)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    unsupported: Vec<UnsupportedTensor>,
    on_release: Option<ReleaseObserver>,
}

impl GgufFile {
    /// Memory-maps `path` read-only and validates it.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let io = |error| GgufError::Io {
            path: path.to_owned(),
            error,
        };
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            let what = if meta.is_dir() {
                "is a directory, not a GGUF file"
            } else {
                "is not a regular file"
            };
            return Err(io(std::io::Error::other(what)));
        }
        let len = meta.len();
        if len == 0 {
            return GgufFile::from_bytes(Vec::new());
        }
        // SAFETY: the mapping is read-only and private to this process. Like every memory-mapped
        // model loader we rely on the file not being truncated or rewritten while it is open;
        // the writer replaces files by rename, which leaves existing mappings intact.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let mut gguf = GgufFile::with_backing(Backing::Mmap(map))?;
        gguf.file = Some(file);
        Ok(gguf)
    }

    /// Validates an in-memory GGUF image.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        GgufFile::with_backing(Backing::Bytes(bytes))
    }

    fn with_backing(backing: Backing) -> Result<GgufFile, GgufError> {
        let Parsed {
            version,
            alignment,
            data_offset,
            metadata,
            key_index,
            tensors,
            tensor_index,
            unsupported,
        } = parse(backing.bytes())?;
        Ok(GgufFile {
            backing,
            file: None,
            version,
            alignment,
            data_offset,
            metadata,
            key_index,
            tensors,
            tensor_index,
            unsupported,
            on_release: None,
        })
    }

    /// Format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Data alignment (`general.alignment` or 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute file offset of the data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// All metadata, in file order.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.key_index.get(key).map(|&i| &self.metadata[i].1)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    /// Any integer type holding a value >= 0.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    /// Any integer type holding a value in `0..=u32::MAX`.
    pub fn get_u32(&self, key: &str) -> Option<u32> {
        u32::try_from(self.get_u64(key)?).ok()
    }

    /// An f32 or f64 value.
    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.get(key)?.as_f32()
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    pub fn get_array(&self, key: &str) -> Option<&MetaArray> {
        self.get(key)?.as_array()
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// Tensors whose ggml type memoria does not compute with, in file order. They are not in
    /// [`GgufFile::tensors`]; the metadata is usable, running the model is not.
    pub fn unsupported_tensors(&self) -> &[UnsupportedTensor] {
        &self.unsupported
    }

    /// An error naming the first tensor of an unsupported type, if there is one: what loading
    /// a model from this file must fail with.
    pub fn check_tensor_types(&self) -> Result<(), GgufError> {
        match self.unsupported.first() {
            Some(t) => Err(t.error()),
            None => Ok(()),
        }
    }

    /// The tensor's bytes, borrowed from the mapping.
    ///
    /// # Panics
    /// If `info` does not describe a range of this file (it did not come from this file).
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        let bytes = self.backing.bytes();
        let range = usize::try_from(info.offset)
            .ok()
            .zip(
                info.offset
                    .checked_add(info.size)
                    .and_then(|e| usize::try_from(e).ok()),
            )
            .and_then(|(start, end)| bytes.get(start..end));
        match range {
            Some(data) => data,
            None => panic!(
                "tensor '{}' ({}+{}) is not inside this {}-byte GGUF file",
                info.name,
                info.offset,
                info.size,
                bytes.len()
            ),
        }
    }

    /// Tells the OS that a tensor's pages of the mapping are not needed now (a copy of it is
    /// used instead): they leave this process's resident set and are read from the file again
    /// when touched. A failure is ignored (the pages stay resident). No effect on an in-memory
    /// image.
    pub fn release(&self, info: &TensorInfo) {
        #[cfg(unix)]
        if let Backing::Mmap(m) = &self.backing {
            let data = self.tensor_data(info);
            let start = data.as_ptr() as usize - m.as_ptr() as usize;
            // SAFETY: a read-only file mapping: dropped pages (memmap2 widens the range
            // to whole pages, so a neighbour's edge page may go too) read back the file's bytes
            // on the next access, so no borrowed slice ever sees different contents (short of
            // the file changing on disk, which any mapping already exposes).
            let _ = unsafe {
                m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, data.len())
            };
        }
        if let Some(observe) = &self.on_release {
            observe(info.size);
        }
    }

    /// Calls `observe` with the byte length of every tensor [`GgufFile::release`]d from now on
    /// (mapped or in memory). Loading a model releases each matrix as soon as its interleaved
    /// copy is made, so this follows that copy, the slow part of loading a large model.
    pub fn on_release(&mut self, observe: impl Fn(u64) + Send + Sync + 'static) {
        self.on_release = Some(Box::new(observe));
    }

    /// blake3 of the whole file. A mapped file is read with `pread` in stretches rather than
    /// through the mapping, so hashing leaves no pages in this process's resident set (the
    /// weights matmul reads from interleaved copies would otherwise be held twice); on a read
    /// error, or for an in-memory image, the mapped bytes are hashed.
    pub fn content_hash(&self) -> [u8; 32] {
        #[cfg(unix)]
        if let Some(hash) = self.file.as_ref().and_then(|f| self.hash_by_reads(f)) {
            return hash;
        }
        let mut h = blake3::Hasher::new();
        h.update_rayon(self.backing.bytes());
        *h.finalize().as_bytes()
    }

    #[cfg(unix)]
    fn hash_by_reads(&self, file: &File) -> Option<[u8; 32]> {
        use std::os::unix::fs::FileExt;
        const STRETCH: usize = 8 << 20;
        let len = self.backing.bytes().len();
        let mut buf = vec![0u8; STRETCH.min(len)];
        let mut h = blake3::Hasher::new();
        let mut at = 0;
        while at < len {
            let want = STRETCH.min(len - at);
            file.read_exact_at(&mut buf[..want], at as u64).ok()?;
            h.update_rayon(&buf[..want]);
            at += want;
        }
        Some(*h.finalize().as_bytes())
    }

    /// The whole file's bytes (from the mapping).
    pub fn bytes(&self) -> &[u8] {
        self.backing.bytes()
    }

    /// Size of the whole file in bytes.
    pub fn file_size(&self) -> u64 {
        self.backing.bytes().len() as u64
    }
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("alignment", &self.alignment)
            .field("metadata_keys", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .field("unsupported_tensors", &self.unsupported.len())
            .field("file_size", &self.file_size())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use memoria_kernels::GgmlType;

    use super::super::GgufWriter;
    use super::*;

    /// The observer hears the byte length of every tensor released, in memory as mapped.
    #[test]
    fn release_tells_the_observer() {
        let mut w = GgufWriter::new();
        w.add_tensor("a", &[4, 2], GgmlType::F32, vec![0; 32])
            .unwrap();
        w.add_tensor("b", &[32], GgmlType::Q8_0, vec![0; 34])
            .unwrap();
        let path =
            std::env::temp_dir().join(format!("memoria-release-{}.gguf", std::process::id()));
        w.write_to(&path).unwrap();
        for mut f in [
            GgufFile::from_bytes(w.to_bytes()).unwrap(),
            GgufFile::open(&path).unwrap(),
        ] {
            let heard = Arc::new(AtomicU64::new(0));
            let h = Arc::clone(&heard);
            f.on_release(move |n| {
                h.fetch_add(n, Ordering::Relaxed);
            });
            for t in f.tensors() {
                f.release(t);
            }
            assert_eq!(heard.load(Ordering::Relaxed), 32 + 34);
            assert_eq!(f.tensor_data(f.tensor("a").unwrap()), &[0u8; 32][..]);
        }
        std::fs::remove_file(&path).unwrap();
    }
}
