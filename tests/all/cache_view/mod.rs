//! The operator's view of the state cache: every prompt block miss under one
//! reason (`misses`, on a pool; `isolated`, through serve with two isolated namespaces), and
//! the cache-sizing advisor's prediction checked against a second serve run at the budget it
//! suggests (`advisor`).

mod advisor;
mod auto_pin;
mod isolated;
mod misses;
