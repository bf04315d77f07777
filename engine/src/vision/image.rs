//! Pictures as a vision encoder reads them: decoded to 8-bit RGB, fitted into the encoder's
//! square (scaled with the aspect ratio kept, centred on black), and normalized into planes.
//!
//! Follows llama.cpp b11434's multimodal preprocessing exactly, since agreement depends on it
//! (`tools/mtmd/mtmd-image.cpp`, `img_tool::resize` with `PAD_CEIL`, and `resize_pillow`, its
//! port of Pillow's fixed-point `Resample.c`; `tools/mtmd/clip-impl.h`, `normalize`).
//! Decoding is the `image` crate's: PNG and other lossless formats give llama.cpp's pixels
//! (stb_image) exactly; JPEG decoders differ in their last bits (IDCT, chroma upsampling).

use crate::error::{Error, Result};

/// The largest picture side accepted (a 100-megapixel photo is 12k × 8k).
pub const MAX_SIDE: u32 = 16_384;
/// The most bytes a decoded picture may take (RGBA at 8 bits on the way, 4 × 64 Mpx).
const MAX_DECODED_BYTES: u64 = 256 << 20;

/// An 8-bit RGB picture, row-major, channels interleaved.
#[derive(Clone)]
pub struct RgbImage {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
    /// [`Self::digest`], once asked for (a picture shared by `Arc` is not changed after).
    digest: std::sync::OnceLock<[u8; 32]>,
}

/// Two pictures are equal when their pixels are.
impl PartialEq for RgbImage {
    fn eq(&self, other: &Self) -> bool {
        self.width == other.width && self.height == other.height && self.pixels == other.pixels
    }
}

impl Eq for RgbImage {}

/// Its size only: a picture's bytes are no one's debug output.
impl std::fmt::Debug for RgbImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RgbImage({} × {})", self.width, self.height)
    }
}

impl RgbImage {
    /// `pixels` holds `width × height × 3` bytes.
    pub fn new(width: u32, height: u32, pixels: Vec<u8>) -> Result<Self> {
        if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
            return Err(Error::InvalidArgument(format!(
                "a picture of {width} × {height} pixels (each side must be 1 to {MAX_SIDE})"
            )));
        }
        if pixels.len() as u64 != u64::from(width) * u64::from(height) * 3 {
            return Err(Error::InvalidArgument(format!(
                "{} bytes are not an RGB picture of {width} × {height}",
                pixels.len()
            )));
        }
        Ok(RgbImage {
            width,
            height,
            pixels,
            digest: Default::default(),
        })
    }

    /// The media type of a picture file Companion keeps (PNG, JPEG, WebP or GIF), from its
    /// first bytes; `None` for anything else.
    pub fn media_type_of(bytes: &[u8]) -> Option<&'static str> {
        match image::guess_format(bytes).ok()? {
            image::ImageFormat::Png => Some("image/png"),
            image::ImageFormat::Jpeg => Some("image/jpeg"),
            image::ImageFormat::WebP => Some("image/webp"),
            image::ImageFormat::Gif => Some("image/gif"),
            _ => None,
        }
    }

    /// The sha256 of the picture's size and pixels: what a session remembers of a picture it
    /// holds, so that the same picture in the next prompt is not encoded again (a file
    /// re-encoded with other bytes but the same pixels is the same picture to the model).
    pub fn digest(&self) -> [u8; 32] {
        *self.digest.get_or_init(|| {
            use sha2::{Digest, Sha256};
            let mut hasher = Sha256::new();
            hasher.update(self.width.to_le_bytes());
            hasher.update(self.height.to_le_bytes());
            hasher.update(&self.pixels);
            hasher.finalize().into()
        })
    }

    /// Decode a PNG, JPEG, GIF, WebP, BMP or PNM file's bytes. As llama.cpp's stb_image
    /// loader does: grey becomes RGB, alpha is dropped (not composited), 16-bit samples keep
    /// their high byte, and EXIF orientation is not applied.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let bad = |e: &dyn std::fmt::Display| {
            Error::InvalidArgument(format!("the picture cannot be read: {e}"))
        };
        let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|e| bad(&e))?;
        if reader.format().is_none() {
            return Err(Error::InvalidArgument(
                "the picture is in no format Companion reads (PNG, JPEG, GIF, WebP, BMP, PNM)"
                    .into(),
            ));
        }
        let mut limits = image::Limits::default();
        limits.max_image_width = Some(MAX_SIDE);
        limits.max_image_height = Some(MAX_SIDE);
        limits.max_alloc = Some(MAX_DECODED_BYTES);
        reader.limits(limits);
        let decoded = reader.decode().map_err(|e| bad(&e))?;
        let rgb = decoded.into_rgb8();
        let (width, height) = rgb.dimensions();
        RgbImage::new(width, height, rgb.into_raw())
    }

    /// The picture scaled to fit `size × size` with its aspect ratio kept and centred on
    /// black, as mtmd's `img_tool::resize` does with `PAD_CEIL`: the scale in f32, each side
    /// rounded up, the offsets halved down; a picture already that size is copied.
    pub fn letterboxed(&self, size: u32) -> RgbImage {
        if self.width == size && self.height == size {
            return self.clone();
        }
        let scale = (size as f32 / self.width as f32).min(size as f32 / self.height as f32);
        let new_w = ((self.width as f32 * scale).ceil() as u32).clamp(1, size);
        let new_h = ((self.height as f32 * scale).ceil() as u32).clamp(1, size);
        let resized = self.resized_bilinear(new_w, new_h);
        let mut out = vec![0u8; size as usize * size as usize * 3];
        let (ox, oy) = ((size - new_w) / 2, (size - new_h) / 2);
        for y in 0..new_h as usize {
            let src = &resized.pixels[y * new_w as usize * 3..][..new_w as usize * 3];
            out[((y + oy as usize) * size as usize + ox as usize) * 3..][..src.len()]
                .copy_from_slice(src);
        }
        RgbImage {
            width: size,
            height: size,
            pixels: out,
            digest: Default::default(),
        }
    }

    /// Pillow's bilinear resampling in fixed point (mtmd's `resize_pillow`): a horizontal
    /// pass, then a vertical one over its 8-bit result; a side that keeps its size skips its
    /// pass.
    pub fn resized_bilinear(&self, width: u32, height: u32) -> RgbImage {
        let (w, h) = (self.width as usize, self.height as usize);
        let (tw, th) = (width as usize, height as usize);
        let mut pixels = self.pixels.clone();
        let mut cur_w = w;
        if tw != w {
            let taps = Taps::bilinear(w, tw);
            let mut out = vec![0u8; tw * h * 3];
            for y in 0..h {
                let src = &pixels[y * w * 3..][..w * 3];
                let dst = &mut out[y * tw * 3..][..tw * 3];
                for (xx, px) in dst.chunks_exact_mut(3).enumerate() {
                    let (start, weights) = taps.of(xx);
                    let mut acc = [ROUNDING; 3];
                    for (i, &k) in weights.iter().enumerate() {
                        for c in 0..3 {
                            acc[c] += i32::from(src[(start + i) * 3 + c]) * k;
                        }
                    }
                    for c in 0..3 {
                        px[c] = clip8(acc[c]);
                    }
                }
            }
            pixels = out;
            cur_w = tw;
        }
        if th != h {
            let taps = Taps::bilinear(h, th);
            let row = cur_w * 3;
            let mut out = vec![0u8; row * th];
            let mut acc = vec![0i32; row];
            for yy in 0..th {
                let (start, weights) = taps.of(yy);
                acc.fill(ROUNDING);
                for (i, &k) in weights.iter().enumerate() {
                    let src = &pixels[(start + i) * row..][..row];
                    for (a, &p) in acc.iter_mut().zip(src) {
                        *a += i32::from(p) * k;
                    }
                }
                for (o, &a) in out[yy * row..][..row].iter_mut().zip(&acc) {
                    *o = clip8(a);
                }
            }
            pixels = out;
        }
        RgbImage {
            width,
            height,
            pixels,
            digest: Default::default(),
        }
    }

    /// The pixels as f32 planes R, G, B (`[3, height, width]`), each `(v / 255 − mean) / std`
    /// (clip-impl.h `normalize`: a division, not a multiplication by 1/std).
    pub fn normalized_planes(&self, mean: [f32; 3], std: [f32; 3]) -> Vec<f32> {
        let n = self.width as usize * self.height as usize;
        let mut out = vec![0f32; 3 * n];
        for (p, px) in self.pixels.chunks_exact(3).enumerate() {
            for c in 0..3 {
                out[c * n + p] = (f32::from(px[c]) / 255.0 - mean[c]) / std[c];
            }
        }
        out
    }
}

/// Fixed-point bits of the resampling weights (Pillow's `PRECISION_BITS`).
const PRECISION_BITS: u32 = 22;
/// Half of one in fixed point: the sums start from it, so the shift rounds.
const ROUNDING: i32 = 1 << (PRECISION_BITS - 1);

fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// One axis's resampling: per output pixel the first input pixel and its fixed-point weights.
struct Taps {
    bounds: Vec<(usize, usize)>,
    ksize: usize,
    weights: Vec<i32>,
}

impl Taps {
    /// Pillow's `precompute_coeffs` for the bilinear filter (support 1), from `in_size` to
    /// `out_size` pixels: widened when shrinking, normalized to sum 1, then rounded to fixed
    /// point by adding ±0.5 and truncating.
    fn bilinear(in_size: usize, out_size: usize) -> Taps {
        let scale = in_size as f64 / out_size as f64;
        let filterscale = scale.max(1.0);
        let support = filterscale;
        let ksize = support.ceil() as usize * 2 + 1;
        let mut bounds = Vec::with_capacity(out_size);
        let mut weights = vec![0i32; out_size * ksize];
        let mut pre = vec![0f64; ksize];
        for xx in 0..out_size {
            let center = (xx as f64 + 0.5) * scale;
            let ss = 1.0 / filterscale;
            // C's truncation toward zero (`(int)`), then the clamps
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let count = xmax.saturating_sub(xmin).min(ksize);
            let mut ww = 0.0;
            pre.fill(0.0);
            for (x, w) in pre.iter_mut().enumerate().take(count) {
                let t = ((x + xmin) as f64 - center + 0.5) * ss;
                *w = (1.0 - t.abs()).max(0.0);
                ww += *w;
            }
            if ww != 0.0 {
                pre.iter_mut().take(count).for_each(|w| *w /= ww);
            }
            for (x, &w) in pre.iter().enumerate() {
                let fixed =
                    w * f64::from(1u32 << PRECISION_BITS) + if w < 0.0 { -0.5 } else { 0.5 };
                weights[xx * ksize + x] = fixed as i32;
            }
            bounds.push((xmin, count));
        }
        Taps {
            bounds,
            ksize,
            weights,
        }
    }

    fn of(&self, out: usize) -> (usize, &[i32]) {
        let (start, count) = self.bounds[out];
        (start, &self.weights[out * self.ksize..][..count])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(w: u32, h: u32) -> RgbImage {
        let pixels = (0..h)
            .flat_map(|y| (0..w).flat_map(move |x| [(x * 7 % 256) as u8, (y * 5 % 256) as u8, 128]))
            .collect();
        RgbImage::new(w, h, pixels).unwrap()
    }

    #[test]
    fn a_picture_of_the_encoder_size_is_copied() {
        let img = gradient(32, 32);
        assert_eq!(img.letterboxed(32), img);
    }

    #[test]
    fn a_wide_picture_is_centred_between_black_bars() {
        // 1280 × 720 into 896: scale 0.7, 896 × 504 (the f32 products round up), 196 rows above
        let img = gradient(1280, 720);
        let out = img.letterboxed(896);
        assert_eq!((out.width, out.height), (896, 896));
        let px = |x: usize, y: usize| &out.pixels[(y * 896 + x) * 3..][..3];
        assert_eq!(px(10, 195), [0, 0, 0]);
        assert_ne!(px(10, 196), [0, 0, 0]);
        assert_ne!(px(10, 699), [0, 0, 0]);
        assert_eq!(px(10, 700), [0, 0, 0]);
    }

    #[test]
    fn a_uniform_picture_stays_uniform_when_resized() {
        let img = RgbImage::new(37, 23, [9u8, 200, 77].repeat(37 * 23)).unwrap();
        for (w, h) in [(10, 10), (100, 61), (37, 50)] {
            let out = img.resized_bilinear(w, h);
            assert!(out.pixels.chunks_exact(3).all(|p| p == [9, 200, 77]));
        }
    }

    #[test]
    fn normalization_is_planar_and_divides_by_std() {
        let img = RgbImage::new(2, 1, vec![0, 255, 51, 255, 0, 102]).unwrap();
        let p = img.normalized_planes([0.5; 3], [0.5; 3]);
        assert_eq!(
            p,
            vec![-1.0, 1.0, 1.0, -1.0, (0.2 - 0.5) / 0.5, (0.4 - 0.5) / 0.5]
        );
    }

    #[test]
    fn bad_pictures_are_refused_with_a_message() {
        assert!(RgbImage::decode(b"not a picture").is_err());
        assert!(RgbImage::decode(&[0x89, b'P', b'N', b'G', 13, 10, 26, 10, 0, 0]).is_err());
        assert!(RgbImage::new(0, 5, vec![]).is_err());
        assert!(RgbImage::new(2, 2, vec![0; 11]).is_err());
    }
}
