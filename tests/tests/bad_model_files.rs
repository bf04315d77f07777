//! A missing, truncated, corrupt or foreign model file gets a clear error, never a panic.

use std::io::{Read, Write};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use companion_tests::model_path;
use engine::{Engine, EngineConfig, Error};

fn load(path: &std::path::Path) -> Result<Engine, Error> {
    Engine::load(EngineConfig {
        model_path: path.to_path_buf(),
        context: 64,
        warm_up: false,
        ..EngineConfig::default()
    })
}

#[test]
fn missing_file_says_how_to_fetch_the_model() {
    let err = load(std::path::Path::new("/nonexistent/model.gguf"))
        .err()
        .unwrap();
    assert!(matches!(err, Error::ModelNotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("scripts/fetch-model"), "{err}");
}

#[test]
fn truncated_file_is_refused_with_byte_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gguf");
    let mut src = std::fs::File::open(model_path()).unwrap();
    let mut head = vec![0u8; 40 << 20];
    src.read_exact(&mut head).unwrap();
    std::fs::write(&path, &head).unwrap();
    let err = load(&path).err().unwrap();
    assert_eq!(err.code(), "invalid_model", "{err:?}");
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn file_cut_inside_the_header_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("header.gguf");
    let mut src = std::fs::File::open(model_path()).unwrap();
    let mut head = vec![0u8; 4096];
    src.read_exact(&mut head).unwrap();
    std::fs::write(&path, &head).unwrap();
    let err = load(&path).err().unwrap();
    assert_eq!(err.code(), "invalid_model", "{err:?}");
}

#[test]
fn non_gguf_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.gguf");
    std::fs::write(&path, b"this is not a model at all").unwrap();
    let err = load(&path).err().unwrap();
    assert!(err.to_string().contains("GGUF magic"), "{err}");
}

#[test]
fn garbage_after_the_magic_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.gguf");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(b"GGUF\x03\x00\x00\x00").unwrap();
    f.write_all(&[0xAB; 1000]).unwrap();
    drop(f);
    let err = load(&path).err().unwrap();
    assert_eq!(err.code(), "invalid_model", "{err:?}");
}

#[test]
fn directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = load(dir.path()).err().unwrap();
    assert_eq!(err.code(), "invalid_model", "{err:?}");
}

fn write_tiny_gguf(path: &std::path::Path, arch: &str) {
    let t = Tensor::zeros((32,), candle_core::DType::F32, &Device::Cpu).unwrap();
    let q = QTensor::quantize(&t, GgmlDType::F32).unwrap();
    let arch_v = Value::String(arch.to_string());
    let mut f = std::fs::File::create(path).unwrap();
    gguf_file::write(
        &mut f,
        &[("general.architecture", &arch_v)],
        &[("output_norm.weight", &q)],
    )
    .unwrap();
}

#[test]
fn another_architecture_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    for arch in ["llama", "gemma2", "gemma"] {
        let path = dir.path().join(format!("{arch}.gguf"));
        write_tiny_gguf(&path, arch);
        let err = load(&path).err().unwrap();
        assert!(
            matches!(err, Error::UnsupportedArchitecture { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(&format!("`{arch}`")), "{err}");
    }
}

#[test]
fn gemma3_with_missing_keys_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bare.gguf");
    write_tiny_gguf(&path, "gemma3");
    let err = load(&path).err().unwrap();
    assert_eq!(err.code(), "invalid_model");
    assert!(err.to_string().contains("gemma3.embedding_length"), "{err}");
}
