//! [`Params`]: a builder for generation parameters (greedy unless a temperature is set).

use crate::raw::session::{GenerateParams, Sampling};

/// How to generate.
#[derive(Clone, Debug)]
pub struct Params {
    max_tokens: u32,
    sampling: Option<Sampling>,
    stop: Vec<String>,
}

impl Params {
    /// Greedy decoding of up to `max_tokens` tokens.
    pub fn new(max_tokens: u32) -> Params {
        Params {
            max_tokens,
            sampling: None,
            stop: Vec::new(),
        }
    }

    /// Samples with `temperature` (llama.cpp's other defaults).
    pub fn temperature(mut self, temperature: f32) -> Params {
        let s = self.sampling.get_or_insert(Sampling {
            temperature,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            seed: 0x006d_656d_6f72_6961,
        });
        s.temperature = temperature;
        self
    }

    /// Seed of the sampler (with a temperature).
    pub fn seed(mut self, seed: u64) -> Params {
        if let Some(s) = self.sampling.as_mut() {
            s.seed = seed;
        }
        self
    }

    /// Stops before `text`.
    pub fn stop(mut self, text: impl Into<String>) -> Params {
        self.stop.push(text.into());
        self
    }

    pub(crate) fn raw(&self) -> GenerateParams {
        GenerateParams {
            max_tokens: self.max_tokens,
            sampling: self.sampling,
            stop: self.stop.clone(),
        }
    }
}
