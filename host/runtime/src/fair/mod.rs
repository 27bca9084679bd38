//! Fair guests: a namespace's looping or CPU-heavy guests may not take more than
//! their share of the host's CPU. Every request's guest time is measured per slice (one poll of
//! its task, [`meter`]: thread CPU time for the accounts, the wall time it held its worker for
//! the share) and charged to its namespace ([`NsCpu`]); a namespace over its share
//! ([`CpuShare`], refilled as a token bucket, [`bucket`]) has its running guests put to sleep
//! at their next epoch callback instead of spinning on a tokio worker, so the workers keep
//! serving the other namespaces. The request's wall-time deadline still ends a throttled guest:
//! no pause runs past it.

mod bucket;
mod clock;
pub(crate) mod meter;
mod ns;
mod share;

pub(crate) use ns::NsCpu;
pub use share::CpuShare;
