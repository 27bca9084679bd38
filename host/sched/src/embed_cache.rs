//! Embeddings cached by content, beside the engine that computes them (one cache for the OpenAI
//! API and the guests' `embeddings` interface): the key is BLAKE3 of the namespace salt and the token ids, so
//! equal inputs in namespaces that share state share entries and isolated namespaces never see
//! each other's. Bounded: the oldest entry goes first once `capacity` is reached.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use memoria_kv::NamespaceSalt;

/// A content key.
pub type EmbedKey = [u8; 32];

/// The key of `tokens` embedded for a namespace with `salt`.
pub fn key(salt: &NamespaceSalt, tokens: &[u32]) -> EmbedKey {
    let mut h = blake3::Hasher::new();
    h.update(b"memoria embedding v1");
    h.update(&salt.0);
    for t in tokens {
        h.update(&t.to_le_bytes());
    }
    *h.finalize().as_bytes()
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<EmbedKey, Arc<Vec<f32>>>,
    order: VecDeque<EmbedKey>,
}

/// The cache.
#[derive(Debug)]
pub struct EmbedCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl EmbedCache {
    /// A cache of at most `capacity` vectors (0: off).
    pub fn new(capacity: usize) -> EmbedCache {
        EmbedCache {
            capacity,
            inner: Mutex::default(),
        }
    }

    /// Most vectors held (0: the cache is off).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// A cached vector.
    pub fn get(&self, k: &EmbedKey) -> Option<Arc<Vec<f32>>> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .get(k)
            .cloned()
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores a vector, evicting the oldest past capacity.
    pub fn put(&self, k: EmbedKey, v: Arc<Vec<f32>>) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.map.insert(k, v).is_none() {
            inner.order.push_back(k);
        }
        while inner.order.len() > self.capacity {
            if let Some(old) = inner.order.pop_front() {
                inner.map.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_salt_and_cache_is_bounded() {
        let a = NamespaceSalt::derive("a");
        let b = NamespaceSalt::derive("b");
        assert_ne!(key(&a, &[1, 2]), key(&b, &[1, 2]));
        assert_eq!(key(&a, &[1, 2]), key(&a, &[1, 2]));
        let c = EmbedCache::new(2);
        for i in 0..3u32 {
            c.put(key(&a, &[i]), Arc::new(vec![i as f32]));
        }
        assert!(c.get(&key(&a, &[0])).is_none());
        assert_eq!(c.get(&key(&a, &[2])).map(|v| v[0]), Some(2.0));
    }
}
