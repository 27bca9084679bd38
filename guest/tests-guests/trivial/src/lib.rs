//! trivial: a component with one export `run(x) -> x + 1` and no imports, for the
//! store + instantiate + call benchmark.

wit_bindgen::generate!({ world: "trivial", path: "wit" });

struct Trivial;

impl Guest for Trivial {
    fn run(x: u32) -> u32 {
        x.wrapping_add(1)
    }
}

export!(Trivial);
