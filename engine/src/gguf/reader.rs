//! A bounded GGUF header parser over the file's bytes, producing candle's `Content` (metadata
//! and tensor infos) so the rest of the engine reads tensors as before. It replaces
//! `gguf_file::Content::read`, which trusts the header: `general.alignment = 0` divided by zero
//! inside it, and a count of 2^60 array elements or tensors is a loop or an allocation of that
//! size. Here every count and length is checked against the bytes that remain before anything
//! is allocated for it, and every offset is checked arithmetic.
//!
//! The format and its rules follow ggml's own reader (`ggml/src/gguf.cpp`, `gguf_init_from_file
//! _impl`): version 2 or 3, keys unique, no arrays of arrays, at most `GGML_MAX_DIMS` (4)
//! dimensions, names of at most `GGML_MAX_NAME` (64) bytes, `general.alignment` a power of two,
//! tensor offsets multiples of it, and the data section starting at the first aligned offset
//! after the header.

use std::collections::{HashMap, HashSet};

use candle_core::quantized::GgmlDType;
use candle_core::quantized::gguf_file::{Content, TensorInfo, Value, VersionedMagic};

/// Why a header was refused, as a sentence fragment ("the header is damaged: …").
pub type HeaderError = String;

const MAGIC: &[u8; 4] = b"GGUF";
/// ggml `GGML_MAX_DIMS`.
const MAX_DIMS: u32 = 4;
/// ggml `GGML_MAX_NAME`.
const MAX_NAME: u64 = 64;
/// ggml `GGUF_DEFAULT_ALIGNMENT`.
const DEFAULT_ALIGNMENT: u64 = 32;
/// Longest string value accepted (a chat template, a token): far above any real one.
const MAX_STRING: u64 = 16 << 20;

/// Parse the header at the start of `bytes` (the whole file).
pub fn read(bytes: &[u8]) -> Result<Content, HeaderError> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(4, "magic")? != MAGIC {
        return Err("it does not start with the GGUF magic bytes".into());
    }
    let version = r.u32("version")?;
    let magic =
        match version {
            2 => VersionedMagic::GgufV2,
            3 => VersionedMagic::GgufV3,
            1 => return Err(
                "it is a GGUF version 1 file, which is no longer supported (re-convert the model)"
                    .into(),
            ),
            v => return Err(format!("GGUF version {v} is not one this build can read")),
        };
    let n_tensors = r.u64("tensor count")?;
    let n_kv = r.u64("metadata count")?;
    // each entry needs a few bytes at least: counts beyond what the file can hold are damage
    r.bounded(n_kv, 8 + 4 + 1, "metadata entries")?;
    r.bounded(n_tensors, 8 + 4 + 4 + 8, "tensors")?;

    let mut metadata = HashMap::with_capacity(n_kv as usize);
    for _ in 0..n_kv {
        let key = r.string("metadata key")?;
        let value_type = r.u32("metadata type")?;
        let value = r.value(value_type, &key, true)?;
        if metadata.insert(key.clone(), value).is_some() {
            return Err(format!("the metadata key `{key}` appears twice"));
        }
    }

    let mut tensor_infos = HashMap::with_capacity(n_tensors as usize);
    let mut names = HashSet::with_capacity(n_tensors as usize);
    for _ in 0..n_tensors {
        let name_len = r.u64("tensor name")?;
        if name_len > MAX_NAME {
            return Err(format!(
                "a tensor name of {name_len} bytes is longer than GGUF allows ({MAX_NAME})"
            ));
        }
        let name = r.utf8(name_len, "tensor name")?;
        let n_dims = r.u32("tensor dimensions")?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(format!(
                "tensor `{name}` has {n_dims} dimensions (1 to {MAX_DIMS} are allowed)"
            ));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        let mut elems: u64 = 1;
        for _ in 0..n_dims {
            let d = r.u64("tensor dimension")?;
            elems = elems
                .checked_mul(d)
                .filter(|&e| e <= i64::MAX as u64)
                .ok_or_else(|| {
                    format!("tensor `{name}` has more elements than any file can hold")
                })?;
            dims.push(usize::try_from(d).map_err(|_| format!("tensor `{name}` is too large"))?);
        }
        if elems == 0 {
            return Err(format!("tensor `{name}` has a dimension of zero"));
        }
        let dtype = ggml_dtype(r.u32("tensor type")?)
            .ok_or_else(|| format!("tensor `{name}` has a data type this build does not know"))?;
        let offset = r.u64("tensor offset")?;
        // GGUF lists dimensions innermost first; candle's shapes are outermost first
        dims.reverse();
        if !names.insert(name.clone()) {
            return Err(format!("the tensor `{name}` appears twice"));
        }
        tensor_infos.insert(
            name,
            TensorInfo {
                ggml_dtype: dtype,
                shape: candle_core::Shape::from(dims),
                offset,
            },
        );
    }

    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(Value::U32(a)) if *a > 0 && a.is_power_of_two() => *a as u64,
        Some(Value::U32(a)) => return Err(format!("general.alignment {a} is not a power of two")),
        Some(_) => return Err("general.alignment is not an unsigned 32-bit integer".into()),
    };
    for (name, info) in &tensor_infos {
        if info.offset % alignment != 0 {
            return Err(format!(
                "tensor `{name}`'s data is not aligned to {alignment} bytes"
            ));
        }
    }
    let tensor_data_offset = (r.pos as u64)
        .checked_next_multiple_of(alignment)
        .ok_or("the header is too large")?;
    Ok(Content {
        magic,
        metadata,
        tensor_infos,
        tensor_data_offset,
    })
}

/// ggml's type ids (`enum ggml_type`) for the types candle can hold.
fn ggml_dtype(t: u32) -> Option<GgmlDType> {
    Some(match t {
        0 => GgmlDType::F32,
        1 => GgmlDType::F16,
        2 => GgmlDType::Q4_0,
        3 => GgmlDType::Q4_1,
        6 => GgmlDType::Q5_0,
        7 => GgmlDType::Q5_1,
        8 => GgmlDType::Q8_0,
        9 => GgmlDType::Q8_1,
        10 => GgmlDType::Q2K,
        11 => GgmlDType::Q3K,
        12 => GgmlDType::Q4K,
        13 => GgmlDType::Q5K,
        14 => GgmlDType::Q6K,
        15 => GgmlDType::Q8K,
        30 => GgmlDType::BF16,
        _ => return None,
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], HeaderError> {
        if n > self.remaining() {
            return Err(format!(
                "the header ends inside the {what} (the file is truncated)"
            ));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// `count` items of at least `min_bytes` each must fit in what remains.
    fn bounded(&self, count: u64, min_bytes: u64, what: &str) -> Result<(), HeaderError> {
        if count.saturating_mul(min_bytes) > self.remaining() as u64 {
            return Err(format!(
                "it claims {count} {what}, more than the file can hold"
            ));
        }
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], HeaderError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32, HeaderError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, HeaderError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn utf8(&mut self, len: u64, what: &str) -> Result<String, HeaderError> {
        let len = usize::try_from(len).map_err(|_| format!("a {what} is too long"))?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("a {what} is not UTF-8"))
    }

    fn string(&mut self, what: &str) -> Result<String, HeaderError> {
        let len = self.u64(what)?;
        if len > MAX_STRING {
            return Err(format!(
                "a {what} of {len} bytes is longer than any real one"
            ));
        }
        self.utf8(len, what)
    }

    /// One metadata value of GGUF type `t` (`gguf_type`); arrays only at the top level.
    fn value(&mut self, t: u32, key: &str, top: bool) -> Result<Value, HeaderError> {
        let what = "metadata value";
        Ok(match t {
            0 => Value::U8(self.array::<1>(what)?[0]),
            1 => Value::I8(self.array::<1>(what)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            4 => Value::U32(self.u32(what)?),
            5 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            7 => match self.array::<1>(what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("`{key}` holds a boolean of value {b}")),
            },
            8 => Value::String(self.string("metadata string")?),
            9 if top => {
                let elem = self.u32("array type")?;
                let count = self.u64("array length")?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    9 => {
                        return Err(format!(
                            "`{key}` is an array of arrays, which GGUF does not allow"
                        ));
                    }
                    other => return Err(format!("`{key}` has an unknown element type {other}")),
                };
                self.bounded(count, min, "array elements")?;
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(elem, key, false)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64(what)?),
            11 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            other => return Err(format!("`{key}` has an unknown value type {other}")),
        })
    }
}

#[cfg(test)]
mod tests;
