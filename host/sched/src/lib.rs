//! memoria-sched: turns logits into tokens (sampling, penalties, stop strings) and, as the
//! session-state memory lands, owns sessions, batching and the engine thread.

pub mod generate;
pub mod sampling;
pub mod stop;
