//! A Fenwick (binary indexed) tree over access-time slots: one mark per tracked key at its
//! last access time, so the keys touched after time `t` (a reuse distance) count in O(log n).

#[derive(Debug)]
pub(crate) struct Fenwick {
    tree: Vec<i32>,
}

impl Fenwick {
    pub fn new(n: usize) -> Self {
        Self {
            tree: vec![0; n + 1],
        }
    }

    pub fn len(&self) -> usize {
        self.tree.len() - 1
    }

    pub fn memory_bytes(&self) -> usize {
        self.tree.len() * 4
    }

    pub fn clear(&mut self) {
        self.tree.fill(0);
    }

    pub fn add(&mut self, at: usize, delta: i32) {
        let mut i = at + 1;
        while i < self.tree.len() {
            self.tree[i] += delta;
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of slots `0..=at`.
    pub fn prefix(&self, at: usize) -> i64 {
        let mut i = (at + 1).min(self.tree.len() - 1);
        let mut s = 0i64;
        while i > 0 {
            s += i64::from(self.tree[i]);
            i &= i - 1;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefix_sums() {
        let mut f = super::Fenwick::new(10);
        for i in 0..10 {
            f.add(i, i as i32);
        }
        f.add(3, -3);
        assert_eq!(f.prefix(0), 0);
        assert_eq!(f.prefix(3), 3);
        assert_eq!(f.prefix(9), 42);
        f.clear();
        assert_eq!(f.prefix(9), 0);
    }
}
