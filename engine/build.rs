//! With the `cuda` feature: compile the fused decode kernels (cuda/decode.cu) with nvcc into
//! one fatbin holding machine code for the GPUs people have (sm_80 A100/A30, sm_86 RTX 30xx,
//! sm_89 RTX 40xx/L4, sm_90 H100/H200) and PTX for newer ones, so the first start on a new
//! machine loads machine code instead of waiting for the driver to compile PTX. Without the
//! feature this does nothing.
//!
//! With the `metal-emulated` feature: compile the Metal kernels (metal/*.metal) as C++ against
//! the emulator's executing <metal_stdlib> (metal-emulator/), see `metal_emulated` below.
//!
//! The compiler is `$NVCC`, else `nvcc` on the PATH (`../shared/notes/cuda-on-h200.md` says
//! how to get one from pip); `$COMPANION_CUDA_ARCHS` (e.g. `90`) narrows the list for a quicker
//! build.

#[cfg(feature = "metal-emulated")]
#[path = "metal-emulator/build.rs"]
mod metal_emulated;

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "metal-emulated")]
    metal_emulated::build();
    println!("cargo:rerun-if-changed=cuda/decode.cu");
    println!("cargo:rerun-if-changed=cuda/quants.cuh");
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=COMPANION_CUDA_ARCHS");
    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    #[cfg(feature = "cuda")]
    record_candle_arch();
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let nvcc = env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    let archs = env::var("COMPANION_CUDA_ARCHS").unwrap_or_else(|_| "80,86,89,90".into());
    let archs: Vec<&str> = archs
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    let newest = archs.iter().max().copied().unwrap_or("90");
    let mut cmd = Command::new(&nvcc);
    cmd.arg("--fatbin")
        .arg("-O3")
        .arg("-std=c++17")
        .arg("--use_fast_math")
        .arg("-o")
        .arg(out.join("decode.fatbin"))
        .arg("cuda/decode.cu");
    for a in &archs {
        cmd.arg(format!("-gencode=arch=compute_{a},code=sm_{a}"));
    }
    // PTX of the newest architecture: what a GPU newer than every listed one compiles
    cmd.arg(format!(
        "-gencode=arch=compute_{newest},code=compute_{newest}"
    ));
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {nvcc} to build the CUDA kernels: {e}"));
    if !status.success() {
        panic!("{nvcc} failed to build engine/cuda/decode.cu ({status})");
    }
}

/// The architecture candle-kernels compiles candle's own kernels for (its PTX and its static
/// matmul library), found by the same call its build script makes (`CUDA_COMPUTE_CAP`, else
/// `nvidia-smi`). Unlike our fatbin above, that code is for this one architecture only:
/// `device::select_device` compares it with the GPU's and says so at start-up.
#[cfg(feature = "cuda")]
fn record_candle_arch() {
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    let arch = cudaforge::detect_compute_cap()
        .map(|a| a.to_nvcc_arch())
        .unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=COMPANION_CANDLE_CUDA_ARCH={arch}");
}
