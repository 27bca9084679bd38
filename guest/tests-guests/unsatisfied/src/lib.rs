//! unsatisfied: a component importing an interface no memoria host provides
//! (`memoria-test:unsatisfied/missing`), which the runtime must refuse at load time.

wit_bindgen::generate!({ world: "unsatisfied", path: "wit" });

struct Unsatisfied;

impl Guest for Unsatisfied {
    fn run() -> u32 {
        memoria_test::unsatisfied::missing::ping()
    }
}

export!(Unsatisfied);
