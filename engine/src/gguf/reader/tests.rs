//! The header parser on headers built byte by byte: a good one, and every kind of damage.

use super::*;

/// Writes a GGUF header (no tensor data follows it).
#[derive(Default)]
pub(crate) struct Builder {
    kv: Vec<u8>,
    n_kv: u64,
    tensors: Vec<u8>,
    n_tensors: u64,
}

impl Builder {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }

    pub fn kv_raw(mut self, key: &str, value_type: u32, value: &[u8]) -> Self {
        Self::string(&mut self.kv, key);
        self.kv.extend_from_slice(&value_type.to_le_bytes());
        self.kv.extend_from_slice(value);
        self.n_kv += 1;
        self
    }

    pub fn u32(self, key: &str, v: u32) -> Self {
        self.kv_raw(key, 4, &v.to_le_bytes())
    }

    pub fn str(self, key: &str, v: &str) -> Self {
        let mut b = Vec::new();
        Self::string(&mut b, v);
        self.kv_raw(key, 8, &b)
    }

    pub fn tensor(mut self, name: &str, dims: &[u64], ggml_type: u32, offset: u64) -> Self {
        Self::string(&mut self.tensors, name);
        self.tensors
            .extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            self.tensors.extend_from_slice(&d.to_le_bytes());
        }
        self.tensors.extend_from_slice(&ggml_type.to_le_bytes());
        self.tensors.extend_from_slice(&offset.to_le_bytes());
        self.n_tensors += 1;
        self
    }

    pub fn counts(&self, n_tensors: u64, n_kv: u64) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&n_tensors.to_le_bytes());
        out.extend_from_slice(&n_kv.to_le_bytes());
        out.extend_from_slice(&self.kv);
        out.extend_from_slice(&self.tensors);
        out
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.counts(self.n_tensors, self.n_kv)
    }
}

fn good() -> Builder {
    Builder::default()
        .str("general.architecture", "gemma3")
        .u32("gemma3.block_count", 2)
        .kv_raw(
            "tokenizer.ggml.scores",
            9,
            &[
                6u32.to_le_bytes().as_slice(),
                &2u64.to_le_bytes(),
                &1.5f32.to_le_bytes(),
                &(-2f32).to_le_bytes(),
            ]
            .concat(),
        )
        .tensor("token_embd.weight", &[64, 10], 8, 0)
        .tensor("output_norm.weight", &[64], 0, 704)
}

#[test]
fn a_good_header_reads_with_shapes_outermost_first() {
    let bytes = good().bytes();
    let c = read(&bytes).unwrap();
    assert_eq!(c.metadata.len(), 3);
    assert!(matches!(&c.metadata["general.architecture"], Value::String(s) if s == "gemma3"));
    assert!(matches!(&c.metadata["tokenizer.ggml.scores"], Value::Array(v) if v.len() == 2));
    let t = &c.tensor_infos["token_embd.weight"];
    assert_eq!(t.shape.dims(), &[10, 64]);
    assert_eq!(t.ggml_dtype, GgmlDType::Q8_0);
    assert_eq!(c.tensor_data_offset % 32, 0);
    assert!(c.tensor_data_offset >= bytes.len() as u64);
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let bytes = good().bytes();
    for n in 0..bytes.len() {
        assert!(
            read(&bytes[..n]).is_err(),
            "a header cut at {n} bytes was accepted"
        );
    }
}

#[test]
fn bad_alignments_are_refused() {
    for a in [0u32, 3, 48] {
        let err = read(&good().u32("general.alignment", a).bytes()).unwrap_err();
        assert!(err.contains("general.alignment"), "{a}: {err}");
    }
    let ok = read(&good().u32("general.alignment", 64).bytes()).unwrap();
    assert_eq!(ok.tensor_data_offset % 64, 0);
    let err = read(&good().str("general.alignment", "32").bytes()).unwrap_err();
    assert!(err.contains("general.alignment"), "{err}");
    // an offset that is not a multiple of the alignment
    let err = read(&good().tensor("x.weight", &[32], 0, 4).bytes()).unwrap_err();
    assert!(err.contains("aligned"), "{err}");
}

#[test]
fn counts_beyond_the_file_are_refused_before_anything_is_allocated() {
    let b = good();
    for (tensors, kv) in [(1u64 << 60, 3), (2, 1 << 60), (u64::MAX, u64::MAX)] {
        let err = read(&b.counts(tensors, kv)).unwrap_err();
        assert!(err.contains("more than the file can hold"), "{err}");
    }
    let huge_array = Builder::default().kv_raw(
        "tokenizer.ggml.tokens",
        9,
        &[8u32.to_le_bytes().as_slice(), &(1u64 << 62).to_le_bytes()].concat(),
    );
    let err = read(&huge_array.bytes()).unwrap_err();
    assert!(err.contains("array elements"), "{err}");
    let huge_string = Builder::default().kv_raw("k", 8, &(1u64 << 62).to_le_bytes());
    assert!(read(&huge_string.bytes()).is_err());
}

#[test]
fn malformed_entries_are_refused_with_what_is_wrong() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            good().u32("general.architecture", 1).bytes(),
            "appears twice",
        ),
        (
            good().tensor("token_embd.weight", &[64], 0, 0).bytes(),
            "appears twice",
        ),
        (
            Builder::default()
                .kv_raw(
                    "k",
                    9,
                    &[9u32.to_le_bytes().as_slice(), &1u64.to_le_bytes()].concat(),
                )
                .bytes(),
            "array of arrays",
        ),
        (
            Builder::default().kv_raw("k", 13, &[]).bytes(),
            "unknown value type",
        ),
        (Builder::default().kv_raw("k", 7, &[2]).bytes(), "boolean"),
        (
            Builder::default().tensor("t", &[], 0, 0).bytes(),
            "dimensions",
        ),
        (
            Builder::default()
                .tensor("t", &[1, 1, 1, 1, 1], 0, 0)
                .bytes(),
            "dimensions",
        ),
        (
            Builder::default().tensor("t", &[4, 0], 0, 0).bytes(),
            "dimension of zero",
        ),
        (
            Builder::default().tensor("t", &[u64::MAX, 2], 0, 0).bytes(),
            "more elements",
        ),
        (
            Builder::default().tensor("t", &[32], 99, 0).bytes(),
            "data type",
        ),
        (
            Builder::default()
                .tensor(&"n".repeat(65), &[32], 0, 0)
                .bytes(),
            "tensor name",
        ),
        (
            Builder::default()
                .kv_raw("k", 8, &[2, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe])
                .bytes(),
            "UTF-8",
        ),
    ];
    for (bytes, want) in cases {
        let err = read(&bytes).unwrap_err();
        assert!(err.contains(want), "{want}: {err}");
    }
    let mut v1 = good().bytes();
    v1[4] = 1;
    assert!(read(&v1).unwrap_err().contains("version 1"));
    assert!(read(b"GGML....").unwrap_err().contains("magic"));
}
