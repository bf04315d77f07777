//! KV snapshots: a session's tokens and K/V as a versioned, self-describing byte stream, and
//! its validated restore. The shape follows llama.cpp's `llama_state_seq_get_data` /
//! `llama_state_seq_set_data` (`llama-context.cpp`, `llama-kv-cache.cpp` `state_write` /
//! `state_read`): a header that names what the data was made with, checked field by field on
//! read, and a restore that leaves the cache empty rather than half-written when anything is off.
//!
//! Layout (integers little-endian):
//!
//! ```text
//! magic      b"CMPKV"
//! version    u32                      FORMAT_VERSION
//! model      [u8; 32]                 sha256 of the GGUF file
//! arch       u32 length + UTF-8       "gemma3", "gemma4", …
//! n_layer, sliding_window (0: none)   u32 each: the model's layers and window
//! cache      u32 count, then per layer that stores K and V:
//!            u32 model layer, u8 sliding, u32 n_kv_head, u32 head_dim
//! dtype      u32                      the cache's element type: 2 f16 (1 f32: older builds)
//! tokens     u32 count + count × u32
//! pictures   u32 count, then per picture u32 first, u32 count, [u8; 32] digest of its
//!            pixels (the positions that hold a picture's rows, see `Session::image_spans`)
//! per cache layer  u32 first, u32 count, K then V as [n_kv_head, count, head_dim] of dtype
//! checksum   [u8; 32]                 sha256 of every byte before it
//! ```
//!
//! A global layer stores positions `0..len`; a sliding layer only its live part, the newest
//! positions still in the ring (at most `window`, at least the `window - 1` the next token
//! attends to), in position order, so a snapshot restores into a session with another ring
//! size. Layers that share another layer's KV (Gemma 4) store nothing and are not listed.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::session::Session;

pub const MAGIC: [u8; 5] = *b"CMPKV";
/// Raised whenever the layout above changes; older streams are refused, not guessed at.
/// Version 2: K/V in the cache's own element type (f16 on the CPU: half the bytes of
/// version 1's f32, and exact, since the values were f16 to begin with). Version 3: every
/// cache layer's own shape (Gemma 4's layers differ, and shared layers store nothing).
/// Version 4: the pictures a session holds, so that a restored conversation reuses them.
pub const FORMAT_VERSION: u32 = 4;
/// K/V element type tags, little-endian.
pub const DTYPE_F32: u32 = 1;
pub const DTYPE_F16: u32 = 2;

/// Bytes of one K/V element of a dtype tag.
fn dtype_bytes(dtype: u32) -> usize {
    if dtype == DTYPE_F16 { 2 } else { 4 }
}

const CHECKSUM_LEN: usize = 32;

/// One cache layer's shape as a snapshot records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLayer {
    /// The model layer it belongs to.
    pub layer: u32,
    pub sliding: bool,
    pub n_kv_head: u32,
    pub head_dim: u32,
}

/// What a snapshot says about the model and cache layout it was made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotHeader {
    pub model_sha256: [u8; 32],
    pub architecture: String,
    pub n_layer: u32,
    /// 0 when no layer slides.
    pub sliding_window: u32,
    pub layers: Vec<SnapshotLayer>,
    pub dtype: u32,
}

/// More cache layers than this is no snapshot of ours (the header is read before it is
/// checked against the engine: a damaged count must not size an allocation).
const MAX_LAYERS: u32 = 4096;

impl SnapshotHeader {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.model_sha256);
        put_u32(out, self.architecture.len() as u32);
        out.extend_from_slice(self.architecture.as_bytes());
        put_u32(out, self.n_layer);
        put_u32(out, self.sliding_window);
        put_u32(out, self.layers.len() as u32);
        for l in &self.layers {
            put_u32(out, l.layer);
            out.push(u8::from(l.sliding));
            put_u32(out, l.n_kv_head);
            put_u32(out, l.head_dim);
        }
        put_u32(out, self.dtype);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let model_sha256 = r.array::<32>("model sha256")?;
        let arch_len = r.u32("architecture")? as usize;
        let architecture = String::from_utf8(r.bytes(arch_len, "architecture")?.to_vec())
            .map_err(|_| Error::SnapshotCorrupt("the architecture is not UTF-8".into()))?;
        let n_layer = r.u32("n_layer")?;
        let sliding_window = r.u32("sliding window")?;
        let count = r.u32("cache layers")?;
        if count > MAX_LAYERS {
            return Err(Error::SnapshotCorrupt(format!(
                "it claims {count} cache layers"
            )));
        }
        let mut layers = Vec::with_capacity(count as usize);
        for _ in 0..count {
            layers.push(SnapshotLayer {
                layer: r.u32("cache layers")?,
                sliding: r.bytes(1, "cache layers")?[0] != 0,
                n_kv_head: r.u32("cache layers")?,
                head_dim: r.u32("cache layers")?,
            });
        }
        let dtype = r.u32("dtype")?;
        Ok(SnapshotHeader {
            model_sha256,
            architecture,
            n_layer,
            sliding_window,
            layers,
            dtype,
        })
    }

    /// The first field, in a fixed order, where `self` (read from a snapshot) differs from
    /// `expected` (this engine).
    pub fn check(&self, expected: &SnapshotHeader) -> Result<()> {
        let mismatch = |field, expected: String, found: String| {
            Err(Error::SnapshotMismatch {
                field,
                expected,
                found,
            })
        };
        if self.model_sha256 != expected.model_sha256 {
            return mismatch(
                "model sha256",
                hex(&expected.model_sha256),
                hex(&self.model_sha256),
            );
        }
        if self.architecture != expected.architecture {
            return mismatch(
                "architecture",
                expected.architecture.clone(),
                self.architecture.clone(),
            );
        }
        let dims = [
            ("n_layer", expected.n_layer, self.n_layer),
            (
                "sliding window",
                expected.sliding_window,
                self.sliding_window,
            ),
        ];
        for (field, want, got) in dims {
            if want != got {
                return mismatch(field, want.to_string(), got.to_string());
            }
        }
        if self.layers.len() != expected.layers.len() {
            return mismatch(
                "cache layers",
                expected.layers.len().to_string(),
                self.layers.len().to_string(),
            );
        }
        for (want, got) in expected.layers.iter().zip(&self.layers) {
            let fields = [
                ("cache layer", want.layer, got.layer),
                (
                    "sliding layers",
                    u32::from(want.sliding),
                    u32::from(got.sliding),
                ),
                ("n_kv_head", want.n_kv_head, got.n_kv_head),
                ("head_dim", want.head_dim, got.head_dim),
            ];
            for (field, w, g) in fields {
                if w != g {
                    return mismatch(
                        field,
                        format!("{w} (layer {})", want.layer),
                        format!("{g} (layer {})", got.layer),
                    );
                }
            }
        }
        if self.dtype != expected.dtype {
            return mismatch("dtype", dtype_name(expected.dtype), dtype_name(self.dtype));
        }
        Ok(())
    }
}

/// Wrap a body (everything after magic and version) into a sealed stream.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + body.len() + CHECKSUM_LEN);
    out.extend_from_slice(&MAGIC);
    put_u32(&mut out, FORMAT_VERSION);
    out.extend_from_slice(body);
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out
}

/// Check magic, version and checksum; return the body.
fn unseal(bytes: &[u8]) -> Result<&[u8]> {
    let corrupt = |why: &str| Error::SnapshotCorrupt(why.to_string());
    if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
        return Err(corrupt(
            "it does not start with the CMPKV magic (is it a KV snapshot?)",
        ));
    }
    let version = bytes
        .get(MAGIC.len()..MAGIC.len() + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| corrupt("it ends before its format version"))?;
    if version != FORMAT_VERSION {
        return Err(Error::SnapshotMismatch {
            field: "format version",
            expected: FORMAT_VERSION.to_string(),
            found: version.to_string(),
        });
    }
    let body_end = bytes
        .len()
        .checked_sub(CHECKSUM_LEN)
        .filter(|&e| e >= MAGIC.len() + 4)
        .ok_or_else(|| corrupt("it ends before its checksum"))?;
    if Sha256::digest(&bytes[..body_end]).as_slice() != &bytes[body_end..] {
        return Err(corrupt(
            "its checksum does not match: the stream is truncated or altered",
        ));
    }
    Ok(&bytes[MAGIC.len() + 4..body_end])
}

/// One layer's stored positions, still as bytes.
struct LayerData<'a> {
    first: usize,
    k: &'a [u8],
    v: &'a [u8],
}

impl Engine {
    /// The header this engine writes and accepts.
    fn snapshot_header(&self, cache: &crate::kv_cache::KvCache) -> Result<SnapshotHeader> {
        let a = self.arch();
        Ok(SnapshotHeader {
            model_sha256: self.model_sha256()?,
            architecture: a.family.as_str().to_string(),
            n_layer: a.n_layer() as u32,
            sliding_window: a.window.unwrap_or(0) as u32,
            layers: (0..cache.n_layer())
                .map(|i| {
                    let (layer, sliding, n_kv_head, head_dim) = cache.layer_shape(i);
                    SnapshotLayer {
                        layer: layer as u32,
                        sliding,
                        n_kv_head: n_kv_head as u32,
                        head_dim: head_dim as u32,
                    }
                })
                .collect(),
            dtype: DTYPE_F16,
        })
    }

    /// The session's tokens and live K/V as a sealed snapshot stream (see the module docs).
    pub fn snapshot(&self, session: &Session) -> Result<Vec<u8>> {
        let cache = session.cache();
        let header = self.snapshot_header(cache)?;
        let mut body = Vec::new();
        header.encode(&mut body);
        put_u32(&mut body, session.len() as u32);
        for &t in session.tokens() {
            put_u32(&mut body, t);
        }
        put_u32(&mut body, session.image_spans().len() as u32);
        for span in session.image_spans() {
            put_u32(&mut body, span.positions.start as u32);
            put_u32(&mut body, span.positions.len() as u32);
            body.extend_from_slice(&span.digest);
        }
        for layer in 0..cache.n_layer() {
            let range = cache.live_range(layer);
            let (k, v) = cache.read_positions(layer, range.clone())?;
            put_u32(&mut body, range.start as u32);
            put_u32(&mut body, range.len() as u32);
            body.reserve(2 * k.len() * dtype_bytes(header.dtype));
            for &x in k.iter().chain(&v) {
                if header.dtype == DTYPE_F16 {
                    body.extend_from_slice(&half::f16::from_f32(x).to_le_bytes());
                } else {
                    body.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
        Ok(seal(&body))
    }

    /// Replace the session's content with a snapshot's. Every header field must match this
    /// engine, and the stream must be whole; otherwise the error names what is wrong and the
    /// session is left empty (and usable).
    pub fn restore(&self, session: &mut Session, bytes: &[u8]) -> Result<()> {
        session.clear();
        let result = self.restore_into(session, bytes);
        if result.is_err() {
            session.clear();
        }
        result
    }

    fn restore_into(&self, session: &mut Session, bytes: &[u8]) -> Result<()> {
        let mut r = Reader {
            bytes: unseal(bytes)?,
        };
        let header = SnapshotHeader::decode(&mut r)?;
        header.check(&self.snapshot_header(session.cache())?)?;

        let len = r.u32("token count")? as usize;
        if len > session.context() {
            return Err(Error::context_full(len, session.context()));
        }
        let n_vocab = self.arch().n_vocab;
        let mut tokens = Vec::with_capacity(len);
        for _ in 0..len {
            let t = r.u32("token ids")?;
            if t as usize >= n_vocab {
                return Err(Error::SnapshotCorrupt(format!(
                    "token id {t} is outside the vocabulary of {n_vocab}"
                )));
            }
            tokens.push(t);
        }
        let pictures = r.u32("picture count")? as usize;
        let mut spans = Vec::with_capacity(pictures.min(len));
        let mut free_from = 0;
        for _ in 0..pictures {
            let first = r.u32("picture positions")? as usize;
            let count = r.u32("picture positions")? as usize;
            let digest: [u8; 32] = r.array("picture digest")?;
            if first < free_from || count == 0 || first.saturating_add(count) > len {
                return Err(Error::SnapshotCorrupt(format!(
                    "a picture at positions {first}..{} of a session of {len}",
                    first.saturating_add(count)
                )));
            }
            free_from = first + count;
            spans.push(crate::session::ImageSpan {
                positions: first..first + count,
                digest,
            });
        }

        let (cache, session_tokens, session_images) = session.parts_mut();
        let window = cache.window();
        let mut layers = Vec::with_capacity(cache.n_layer());
        let mut sliding_from = None;
        for layer in 0..cache.n_layer() {
            let (_, _, n_kv, d) = cache.layer_shape(layer);
            let first = r.u32("layer range")? as usize;
            let count = r.u32("layer range")? as usize;
            let sliding = cache.is_sliding(layer);
            let fits = first.checked_add(count) == Some(len)
                && if sliding {
                    count <= window
                        && count >= len.min(window.saturating_sub(1))
                        && sliding_from.is_none_or(|f| f == first)
                } else {
                    first == 0
                };
            if !fits {
                return Err(Error::SnapshotCorrupt(format!(
                    "layer {layer} holds positions {first}..{} of a session of {len}",
                    first + count
                )));
            }
            if sliding {
                sliding_from = Some(first);
            }
            let n = (n_kv * d * dtype_bytes(header.dtype))
                .checked_mul(count)
                .ok_or_else(|| Error::SnapshotCorrupt("a layer's size overflows".into()))?;
            let k = r.bytes(n, "layer K")?;
            let v = r.bytes(n, "layer V")?;
            layers.push(LayerData { first, k, v });
        }
        if !r.bytes.is_empty() {
            return Err(Error::SnapshotCorrupt(format!(
                "{} unexpected bytes after the last layer",
                r.bytes.len()
            )));
        }
        for (layer, data) in layers.iter().enumerate() {
            let (k, v) = (to_f32(data.k, header.dtype), to_f32(data.v, header.dtype));
            cache.write_slices(layer, data.first, &k, &v)?;
        }
        cache.finish_restore(len, sliding_from.unwrap_or(len));
        *session_tokens = tokens;
        *session_images = spans;
        Ok(())
    }
}

/// The sha256 of a file, streamed.
pub(crate) fn file_sha256(path: &Path) -> Result<[u8; 32]> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().into())
}

/// A bounds-checked cursor: running out of bytes is corruption, named by what was being read.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(Error::SnapshotCorrupt(format!("it ends inside the {what}")));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array::<4>(what)?))
    }
}

fn put_u32(out: &mut Vec<u8>, x: u32) {
    out.extend_from_slice(&x.to_le_bytes());
}

fn to_f32(bytes: &[u8], dtype: u32) -> Vec<f32> {
    if dtype == DTYPE_F16 {
        return bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect();
    }
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn dtype_name(tag: u32) -> String {
    match tag {
        DTYPE_F32 => "f32".into(),
        DTYPE_F16 => "f16".into(),
        other => format!("unknown type {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> SnapshotHeader {
        let layer = |layer, sliding| SnapshotLayer {
            layer,
            sliding,
            n_kv_head: 1,
            head_dim: 4,
        };
        SnapshotHeader {
            model_sha256: [7; 32],
            architecture: "gemma3".into(),
            n_layer: 3,
            sliding_window: 512,
            layers: vec![layer(0, true), layer(1, true), layer(2, false)],
            dtype: DTYPE_F16,
        }
    }

    fn sealed(h: &SnapshotHeader) -> Vec<u8> {
        let mut body = Vec::new();
        h.encode(&mut body);
        seal(&body)
    }

    #[test]
    fn header_round_trips_through_a_sealed_stream() {
        let bytes = sealed(&header());
        assert_eq!(&bytes[..5], b"CMPKV");
        assert_eq!(&bytes[5..9], &FORMAT_VERSION.to_le_bytes());
        let mut r = Reader {
            bytes: unseal(&bytes).unwrap(),
        };
        let back = SnapshotHeader::decode(&mut r).unwrap();
        assert_eq!(back, header());
        assert!(r.bytes.is_empty());
        back.check(&header()).unwrap();
    }

    #[test]
    fn each_field_mismatch_is_named() {
        let mut cases: Vec<(&str, SnapshotHeader)> = Vec::new();
        let mut h = header();
        h.model_sha256[31] ^= 1;
        cases.push(("model sha256", h));
        let mut h = header();
        h.architecture = "llama".into();
        cases.push(("architecture", h));
        let mut h = header();
        h.layers[2].n_kv_head = 2;
        cases.push(("n_kv_head", h));
        let mut h = header();
        h.layers[0].head_dim = 8;
        cases.push(("head_dim", h));
        let mut h = header();
        h.sliding_window = 1024;
        cases.push(("sliding window", h));
        let mut h = header();
        h.layers[1].sliding = false;
        cases.push(("sliding layers", h));
        let mut h = header();
        h.layers.pop();
        cases.push(("cache layers", h));
        let mut h = header();
        h.layers[1].layer = 5;
        cases.push(("cache layer", h));
        let mut h = header();
        h.dtype = DTYPE_F32;
        cases.push(("dtype", h));
        for (want, h) in cases {
            match h.check(&header()) {
                Err(Error::SnapshotMismatch { field, .. }) => assert_eq!(field, want),
                other => panic!("{want}: expected a mismatch, got {other:?}"),
            }
        }
    }

    #[test]
    fn damaged_streams_are_corrupt_and_other_versions_mismatched() {
        let good = sealed(&header());
        let mut flipped = good.clone();
        flipped[20] ^= 0x10;
        let mut version = good.clone();
        version[5] = FORMAT_VERSION as u8 + 1;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (good[..good.len() - 1].to_vec(), "snapshot_corrupt"),
            (good[..7].to_vec(), "snapshot_corrupt"),
            (flipped, "snapshot_corrupt"),
            (b"GGUF-not-a-snapshot".to_vec(), "snapshot_corrupt"),
            (version, "snapshot_mismatch"),
        ];
        for (bytes, code) in cases {
            let err = unseal(&bytes).expect_err("refused");
            assert_eq!(err.code(), code, "{err}");
        }
    }

    #[test]
    fn reading_past_the_end_names_the_field() {
        let mut r = Reader { bytes: &[1, 2] };
        let err = r.u32("token count").unwrap_err();
        assert!(err.to_string().contains("token count"), "{err}");
    }
}
