//! aarch64 kernels (Apple silicon, ARM Linux): three kernel tables — `neon`, `dotprod`,
//! `i8mm` — chosen at run time (`cpu::features`), following ggml's `ggml-cpu/arch/arm/`.
//! DOCS-TODO

mod attention;
mod blocks;
mod blocks_i8mm;
mod dot;
mod gemm;
mod kquants;
mod ops;
pub(crate) mod tables;
#[cfg(test)]
mod tests;
