//! Opening a GGUF file: the header through our bounded parser (`reader`, into candle's
//! `gguf_file::Content`), with the checks a user's file needs before we trust it — present,
//! not truncated, tensor data inside the file — and typed access to its metadata ([`Meta`])
//! and tensors. This layer knows the file format, not the model: what the metadata describes
//! is read by `crate::arch` (`ModelArch::of`), and which tensors a model needs, with which
//! shapes, by `crate::model::weights`.
//!
//! Follows llama.cpp's loader (`llama-model-loader.cpp`): metadata is read first, then the
//! architecture decides which keys and tensors are required; tensor data must lie inside the
//! file.

mod file_type;
pub mod keys;
mod mapped;
pub mod reader;
mod resident;
pub use resident::moves_pending as huge_page_moves_pending;
pub(crate) use resident::pause_moves;

use std::fs::File;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use candle_core::Device;
use candle_core::quantized::gguf_file::{Content, TensorInfo, Value};
use candle_core::quantized::{GgmlDType, QTensor};

pub use file_type::file_type_label;
pub use mapped::WeightBytes;

use crate::error::{Error, Result};

/// An opened, validated GGUF file, memory-mapped (see `mapped`).
pub struct ModelFile {
    path: PathBuf,
    content: Content,
    map: Arc<Mmap>,
    /// Kept open to read multiplied weights onto huge pages (`resident`).
    handle: File,
    /// The weights our kernels multiply: name and file byte range `(start, len)`.
    multiplied: Vec<(String, (usize, usize))>,
    file_size: u64,
}

impl std::fmt::Debug for ModelFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelFile")
            .field("path", &self.path)
            .field("file_size", &self.file_size)
            .finish()
    }
}

impl ModelFile {
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::ModelNotFound { path });
            }
            Err(source) => return Err(Error::Io { path, source }),
        };
        let meta = file.metadata().map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() {
            return Err(Error::InvalidModel {
                path,
                reason: "it is a directory, not a file".into(),
            });
        }
        let file_size = meta.len();
        let bad_magic = || Error::InvalidModel {
            path: path.clone(),
            reason: "it does not start with the GGUF magic bytes (is it a GGUF file?)".into(),
        };
        if file_size < 4 {
            return Err(bad_magic());
        }
        // SAFETY: the mapping is read-only and private to this process. As with llama.cpp's
        // mmap, changing the file in place while it is loaded is not supported; our own
        // tools replace model files by rename, which leaves a mapped file intact.
        let map = unsafe { Mmap::map(&file) }.map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        if &map[..4] != b"GGUF" {
            return Err(bad_magic());
        }
        let content = reader::read(&map[..]).map_err(|e| Error::InvalidModel {
            path: path.clone(),
            reason: format!("the header is damaged or truncated: {e}"),
        })?;
        let file = ModelFile {
            path,
            content,
            map: Arc::new(map),
            handle: file,
            multiplied: Vec::new(),
            file_size,
        };
        file.check_tensor_data_in_bounds()?;
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    pub fn metadata(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(key)
    }

    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.content.tensor_infos.keys().map(String::as_str)
    }

    /// A file cut short (an interrupted download) has a valid header but tensor data past its
    /// end; catch that here with the byte counts rather than as an EOF deep in loading.
    fn check_tensor_data_in_bounds(&self) -> Result<()> {
        check_tensor_bounds(&self.path, &self.content, self.file_size)
    }

    fn invalid(&self, reason: String) -> Error {
        Error::InvalidModel {
            path: self.path.clone(),
            reason,
        }
    }

    /// The tensor's info, checking that it exists and has the expected logical shape.
    fn checked_info(&self, name: &str, shape: &[usize]) -> Result<&TensorInfo> {
        let info = self
            .content
            .tensor_infos
            .get(name)
            .ok_or_else(|| self.invalid(format!("tensor `{name}` is missing")))?;
        if info.shape.dims() != shape {
            return Err(self.invalid(format!(
                "tensor `{name}` has shape {:?}, expected {:?}",
                info.shape.dims(),
                shape
            )));
        }
        Ok(info)
    }

    /// Read one tensor, checking that it exists and has the expected logical shape
    /// (in candle's row-major order, i.e. GGUF dims reversed).
    pub fn tensor(&mut self, name: &str, shape: &[usize], device: &Device) -> Result<QTensor> {
        self.checked_info(name, shape)?;
        let info = &self.content.tensor_infos[name];
        let offset = self.content.tensor_data_offset;
        info.read(&mut Cursor::new(&self.map[..]), offset, device)
            .map_err(|e| Error::InvalidModel {
                path: self.path.clone(),
                reason: format!("tensor `{name}` could not be read ({e})"),
            })
    }

    /// The raw bytes of a tensor (its ggml blocks), checking name and shape, without building
    /// a candle tensor: for weights the engine multiplies with its own kernels.
    pub fn tensor_bytes(
        &mut self,
        name: &str,
        shape: &[usize],
    ) -> Result<(GgmlDType, WeightBytes)> {
        self.tensor_bytes_and_range(name, shape)
            .map(|(dtype, bytes, _)| (dtype, bytes))
    }

    /// [`Self::tensor_bytes`] for a weight our kernels multiply: remembered, so that
    /// [`Self::move_multiplied_to_huge_pages`] can move its pages.
    pub fn multiplied_tensor_bytes(
        &mut self,
        name: &str,
        shape: &[usize],
    ) -> Result<(GgmlDType, WeightBytes)> {
        let (dtype, bytes, range) = self.tensor_bytes_and_range(name, shape)?;
        self.multiplied.push((name.to_string(), range));
        Ok((dtype, bytes))
    }

    /// Where tensor `name`'s data lies in the file, `(start, len)` in bytes, if it is there and
    /// inside the file: for a GPU that reads the mapped file in place (the fused Metal decode).
    pub(crate) fn tensor_range(&self, name: &str) -> Option<(usize, usize)> {
        let info = self.content.tensor_infos.get(name)?;
        let len = usize::try_from(tensor_byte_len(info)?).ok()?;
        let start = self.content.tensor_data_offset.checked_add(info.offset)?;
        let start = usize::try_from(start).ok()?;
        (start.checked_add(len)? <= self.map.len()).then_some((start, len))
    }

    /// The whole file's mapping (see [`Self::tensor_range`]).
    #[cfg_attr(
        not(any(feature = "metal", feature = "metal-emulated")),
        allow(dead_code)
    )]
    pub(crate) fn mapping(&self) -> Arc<Mmap> {
        self.map.clone()
    }

    /// A tensor's type, its mapped bytes and their range `(start, len)` in the file, checking
    /// name and shape.
    fn tensor_bytes_and_range(
        &self,
        name: &str,
        shape: &[usize],
    ) -> Result<(GgmlDType, WeightBytes, (usize, usize))> {
        let info = self.checked_info(name, shape)?;
        let dtype = info.ggml_dtype;
        let len = tensor_byte_len(info).and_then(|l| usize::try_from(l).ok());
        let offset = self.content.tensor_data_offset.checked_add(info.offset);
        offset
            .and_then(|o| usize::try_from(o).ok())
            .zip(len)
            .and_then(|(start, len)| {
                WeightBytes::mapped(self.map.clone(), start, len).map(|b| (dtype, b, (start, len)))
            })
            .ok_or_else(|| self.invalid(format!("tensor `{name}` lies past the end of the file")))
    }

    /// On Linux with transparent huge pages: moves the pages of the weights our kernels
    /// multiply onto huge pages, on a background thread at the lowest priority, in place (see
    /// `resident`; `COMPANION_HUGE_PAGES=0` turns it off). Elsewhere, or with none to move,
    /// nothing.
    pub fn move_multiplied_to_huge_pages(&self) {
        if self.multiplied.is_empty() || !resident::wanted() {
            return;
        }
        match self.handle.try_clone() {
            Ok(file) => {
                let ranges = self.multiplied.iter().map(|(_, r)| *r).collect();
                resident::promote_in_background(self.map.clone(), file, ranges)
            }
            Err(e) => tracing::debug!(error = %e, "the weights stay on base pages"),
        }
    }

    /// Names of the tensors loaded through [`Self::multiplied_tensor_bytes`].
    pub fn multiplied_tensor_names(&self) -> impl Iterator<Item = &str> {
        self.multiplied.iter().map(|(n, _)| n.as_str())
    }

    pub fn tensor_dtype(&self, name: &str) -> Option<GgmlDType> {
        self.content.tensor_infos.get(name).map(|i| i.ggml_dtype)
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// Quantization label for display ("Q4_K_M" style where `general.file_type` says so).
    pub fn quantization_label(&self) -> String {
        let ft = self.metadata(keys::FILE_TYPE).and_then(|v| v.to_u32().ok());
        file_type_label(ft).to_string()
    }

    /// Total bytes of tensor data (weights), for memory estimates and display.
    pub fn weight_bytes(&self) -> u64 {
        self.content
            .tensor_infos
            .values()
            .filter_map(tensor_byte_len)
            .fold(0u64, u64::saturating_add)
    }

    /// Bytes of one tensor's data, if present.
    pub fn tensor_data_bytes(&self, name: &str) -> Option<u64> {
        self.content
            .tensor_infos
            .get(name)
            .and_then(tensor_byte_len)
    }

    /// A tensor's shape in candle's row-major order (GGUF dims reversed), if present.
    pub fn tensor_dims(&self, name: &str) -> Option<&[usize]> {
        self.content.tensor_infos.get(name).map(|i| i.shape.dims())
    }
}

/// Every tensor's data must be whole blocks of its type and lie inside the file.
fn check_tensor_bounds(path: &Path, content: &Content, file_size: u64) -> Result<()> {
    let invalid = |reason: String| Error::InvalidModel {
        path: path.to_path_buf(),
        reason,
    };
    let mut needed = content.tensor_data_offset;
    for (name, info) in &content.tensor_infos {
        let bytes = tensor_byte_len(info).ok_or_else(|| {
            invalid(format!(
                "tensor `{name}` has a shape of {:?} that is not whole blocks of its type or is too large",
                info.shape.dims()
            ))
        })?;
        let end = content
            .tensor_data_offset
            .checked_add(info.offset)
            .and_then(|start| start.checked_add(bytes))
            .ok_or_else(|| invalid(format!("tensor `{name}` lies past any file size")))?;
        needed = needed.max(end);
    }
    if needed > file_size {
        return Err(invalid(format!(
            "the file is truncated: its tensors need {needed} bytes but it has {file_size} (re-download it)"
        )));
    }
    Ok(())
}

/// A header in memory with the checks opening a file runs on it — the bounded parser, the
/// tensors' bounds — for what reads a header without a file (the fuzzer, through
/// `ModelArch::check_header`).
pub struct Header {
    content: Content,
}

impl Header {
    const PATH: &'static str = "<memory>";

    /// Parse `bytes`, the whole file or its beginning (tensor data past the end is refused).
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let path = Path::new(Self::PATH);
        let content = reader::read(bytes).map_err(|e| Error::InvalidModel {
            path: path.to_path_buf(),
            reason: format!("the header is damaged or truncated: {e}"),
        })?;
        check_tensor_bounds(path, &content, bytes.len() as u64)?;
        Ok(Header { content })
    }

    pub(crate) fn meta(&self) -> Meta<'_> {
        Meta {
            path: Path::new(Self::PATH),
            metadata: &self.content.metadata,
        }
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }
}

/// Bytes of a tensor's data, or `None` when its element count is not whole blocks of its type
/// or the size overflows.
fn tensor_byte_len(info: &TensorInfo) -> Option<u64> {
    let elems = info
        .shape
        .dims()
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64))?;
    let block = info.ggml_dtype.block_size() as u64;
    if block == 0 || elems % block != 0 {
        return None;
    }
    (elems / block).checked_mul(info.ggml_dtype.type_size() as u64)
}

/// Typed accessors over metadata values that turn absence or a wrong type into a clear error.
pub(crate) struct Meta<'a> {
    pub path: &'a Path,
    pub metadata: &'a std::collections::HashMap<String, Value>,
}

impl Meta<'_> {
    fn missing(&self, key: &str) -> Error {
        Error::InvalidModel {
            path: self.path.to_path_buf(),
            reason: format!("required metadata key `{key}` is missing"),
        }
    }
    fn wrong(&self, key: &str, want: &str) -> Error {
        Error::InvalidModel {
            path: self.path.to_path_buf(),
            reason: format!("metadata key `{key}` is not {want}"),
        }
    }
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }
    pub fn string(&self, key: &str) -> Result<&str> {
        let v = self.get(key).ok_or_else(|| self.missing(key))?;
        v.to_string()
            .map(String::as_str)
            .map_err(|_| self.wrong(key, "a string"))
    }
    pub fn usize(&self, key: &str) -> Result<usize> {
        let v = self.get(key).ok_or_else(|| self.missing(key))?;
        value_to_u64(v)
            .map(|x| x as usize)
            .ok_or_else(|| self.wrong(key, "an unsigned integer"))
    }
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => value_to_u64(v)
                .map(|x| Some(x as usize))
                .ok_or_else(|| self.wrong(key, "an unsigned integer")),
        }
    }
    pub fn f32(&self, key: &str) -> Result<f32> {
        let v = self.get(key).ok_or_else(|| self.missing(key))?;
        value_to_f64(v)
            .map(|x| x as f32)
            .ok_or_else(|| self.wrong(key, "a number"))
    }
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => value_to_f64(v)
                .map(|x| Some(x as f32))
                .ok_or_else(|| self.wrong(key, "a number")),
        }
    }
    pub fn opt_bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(|v| v.to_bool().ok())
    }
    pub fn array(&self, key: &str) -> Result<&Vec<Value>> {
        let v = self.get(key).ok_or_else(|| self.missing(key))?;
        v.to_vec().map_err(|_| self.wrong(key, "an array"))
    }
}

pub(crate) fn value_to_u64(v: &Value) -> Option<u64> {
    match v {
        Value::U8(x) => Some(*x as u64),
        Value::U16(x) => Some(*x as u64),
        Value::U32(x) => Some(*x as u64),
        Value::U64(x) => Some(*x),
        Value::I8(x) if *x >= 0 => Some(*x as u64),
        Value::I16(x) if *x >= 0 => Some(*x as u64),
        Value::I32(x) if *x >= 0 => Some(*x as u64),
        Value::I64(x) if *x >= 0 => Some(*x as u64),
        _ => None,
    }
}

pub(crate) fn value_to_f64(v: &Value) -> Option<f64> {
    match v {
        Value::F32(x) => Some(*x as f64),
        Value::F64(x) => Some(*x),
        other => value_to_u64(other).map(|x| x as f64),
    }
}

impl ModelFile {
    pub(crate) fn meta(&self) -> Meta<'_> {
        Meta {
            path: &self.path,
            metadata: &self.content.metadata,
        }
    }
}
