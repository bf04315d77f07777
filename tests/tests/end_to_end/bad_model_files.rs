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
    write_gguf_with(path, arch, &[]);
}

/// A GGUF of one tensor and `general.architecture` plus `extra` metadata.
fn write_gguf_with(path: &std::path::Path, arch: &str, extra: &[(&str, Value)]) {
    let t = Tensor::zeros((32,), candle_core::DType::F32, &Device::Cpu).unwrap();
    let q = QTensor::quantize(&t, GgmlDType::F32).unwrap();
    let arch_v = Value::String(arch.to_string());
    let mut metadata = vec![("general.architecture", &arch_v)];
    metadata.extend(extra.iter().map(|(k, v)| (*k, v)));
    let mut f = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut f, &metadata, &[("blk.0.attn_norm.weight", &q)]).unwrap();
}

#[test]
fn another_architecture_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    for arch in ["llama", "qwen2", "phi3"] {
        let path = dir.path().join(format!("{arch}.gguf"));
        write_tiny_gguf(&path, arch);
        let err = load(&path).err().unwrap();
        assert!(
            matches!(err, Error::UnsupportedArchitecture { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(&format!("`{arch}`")), "{err}");
        assert!(
            err.to_string().contains("gemma, gemma2, gemma3 and gemma4"),
            "{err}"
        );
    }
}

#[test]
fn a_gemma_of_any_generation_with_missing_keys_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for arch in ["gemma", "gemma2", "gemma3", "gemma4"] {
        let path = dir.path().join(format!("bare-{arch}.gguf"));
        write_tiny_gguf(&path, arch);
        let err = load(&path).err().unwrap();
        assert_eq!(err.code(), "invalid_model");
        assert!(
            err.to_string()
                .contains(&format!("`{arch}.block_count` is missing")),
            "{err}"
        );
    }
}

/// A file's case: its name (or architecture), the metadata written into it, and what the
/// refusal must say.
type Case = (&'static str, Vec<(&'static str, Value)>, &'static str);

/// Kinds of model Companion does not run are refused in one line that says which.
#[test]
fn unsupported_kinds_of_model_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<Case> = vec![
        (
            "gemma4",
            vec![("gemma4.expert_count", Value::U32(128))],
            "mixture-of-experts",
        ),
        ("clip", vec![], "projector"),
        ("gemma-embedding", vec![], "embedding model"),
        ("gemma3n", vec![], "Gemma 3n"),
    ];
    for (arch, extra, want) in cases {
        let path = dir.path().join(format!("{arch}.gguf"));
        write_gguf_with(&path, arch, &extra);
        let err = load(&path).err().unwrap();
        assert_eq!(err.code(), "unsupported_model", "{err:?}");
        let line = err.to_string();
        assert!(line.contains(want) && !line.contains('\n'), "{line}");
    }
}

/// A hostile header: what used to panic inside candle's reader (alignment 0) or loop on a
/// huge count is a one-line refusal.
#[test]
fn hostile_header_values_are_refused_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<Case> = vec![
        (
            "alignment0",
            vec![("general.alignment", Value::U32(0))],
            "general.alignment",
        ),
        (
            "alignment5",
            vec![("general.alignment", Value::U32(5))],
            "general.alignment",
        ),
        (
            "layers",
            vec![("gemma3.block_count", Value::U64(1 << 60))],
            "block_count is 1152921504606846976",
        ),
    ];
    for (name, extra, want) in cases {
        let path = dir.path().join(format!("{name}.gguf"));
        write_gguf_with(&path, "gemma3", &extra);
        let err = load(&path).err().unwrap();
        assert_eq!(err.code(), "invalid_model", "{name}: {err:?}");
        assert!(err.to_string().contains(want), "{name}: {err}");
    }
}

/// Our bounded header parser reads the real model exactly as candle's reader does.
#[test]
fn the_bounded_parser_reads_the_real_header_as_candle_does() {
    let bytes = std::fs::read(model_path()).unwrap();
    let ours = engine::gguf::reader::read(&bytes).unwrap();
    let theirs = gguf_file::Content::read(&mut std::io::Cursor::new(&bytes)).unwrap();
    assert_eq!(ours.tensor_data_offset, theirs.tensor_data_offset);
    assert_eq!(ours.tensor_infos.len(), theirs.tensor_infos.len());
    for (name, t) in &theirs.tensor_infos {
        let o = &ours.tensor_infos[name];
        assert_eq!(
            (o.ggml_dtype, o.shape.dims(), o.offset),
            (t.ggml_dtype, t.shape.dims(), t.offset),
            "{name}"
        );
    }
    assert_eq!(ours.metadata.len(), theirs.metadata.len());
    for (key, v) in &theirs.metadata {
        assert_eq!(
            format!("{:?}", ours.metadata[key]),
            format!("{v:?}"),
            "{key}"
        );
    }
}
