//! Integration tests: kernels.
