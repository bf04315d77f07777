//! The pictures of a scanned PDF's pages: a page without a text layer is, to a scanner, one
//! image drawn over the page. For each page the largest image its resources hold is taken, as
//! a picture file (`DCTDecode`: the stream is a JPEG file) or as pixels (no filter, or only
//! Flate, LZW and ASCII85, with PNG predictors: 8-bit grey, RGB or CMYK, and 1-bit grey).
//! JPEG 2000 (`JPXDecode`) and the fax codecs of black-and-white scans (`CCITTFaxDecode`,
//! `JBIG2Decode`) are refused by name. What the image filters mean: PDF 32000-1 §7.4 and
//! §8.9 (image dictionaries, `Decode`, colour spaces); the predictors: §7.4.4.4 and PNG's
//! own filter types (RFC 2083 §6).
//!
//! Every stream was vetted when the document was loaded (`pdf::load`), and each image's
//! pixels are bounded again here before any buffer is made for them.

use std::path::Path;

use lopdf::{Dictionary, Document, Object, Stream};

use crate::error::Result;
use crate::pdf::{MAX_STREAM_BYTES, Refusal, decoded, guarded, inherited_resources, load};

/// The most pages read as pictures: each is a pass of a vision encoder.
pub const MAX_PICTURE_PAGES: usize = 1000;
/// The largest side of a page picture (a page scanned at 600 dpi is about 7000 pixels high).
const MAX_SIDE: u64 = 16_384;

/// One page read as a picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePicture {
    /// The page's number, from 1.
    pub page: usize,
    pub picture: PictureData,
}

/// A picture as a vision encoder's caller decodes it.
#[derive(Clone, PartialEq, Eq)]
pub enum PictureData {
    /// A picture file (a JPEG from a PDF, or a photo given as the document).
    File(Vec<u8>),
    /// 8-bit RGB pixels, row-major, channels interleaved.
    Rgb {
        width: u32,
        height: u32,
        pixels: Vec<u8>,
    },
}

/// Its size only: a picture's bytes are no one's debug output.
impl std::fmt::Debug for PictureData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PictureData::File(bytes) => write!(f, "File({} bytes)", bytes.len()),
            PictureData::Rgb { width, height, .. } => write!(f, "Rgb({width} × {height})"),
        }
    }
}

/// The page pictures of the PDF `bytes` (read from `path`), in page order; pages that draw no
/// image are left out. Empty when no page has one.
pub(crate) fn pdf_page_pictures(path: &Path, bytes: &[u8]) -> Result<Vec<PagePicture>> {
    guarded(path, || {
        let doc = load(bytes)?;
        let pages = doc.get_pages();
        let mut out = Vec::new();
        for (number, page_id) in pages {
            let Ok(page) = doc.get_dictionary(page_id) else {
                continue;
            };
            let Some(resources) = inherited_resources(&doc, page)? else {
                continue;
            };
            let Some(image) = largest_image(&doc, resources) else {
                continue;
            };
            if out.len() == MAX_PICTURE_PAGES {
                return Err(Refusal::TooComplex(format!(
                    "it has more than {MAX_PICTURE_PAGES} pages of pictures to read"
                )));
            }
            out.push(PagePicture {
                page: number as usize,
                picture: picture(&doc, image)?,
            });
        }
        Ok(out)
    })
}

/// The image XObject of `resources` with the most pixels.
fn largest_image<'a>(doc: &'a Document, resources: &'a Dictionary) -> Option<&'a Stream> {
    let objects = resources
        .get_deref(b"XObject", doc)
        .and_then(Object::as_dict)
        .ok()?;
    objects
        .iter()
        .filter_map(|(_, object)| {
            let stream = match object {
                Object::Reference(id) => doc.get_object(*id).and_then(Object::as_stream).ok()?,
                Object::Stream(stream) => stream,
                _ => return None,
            };
            let is_image = stream
                .dict
                .get(b"Subtype")
                .and_then(Object::as_name)
                .is_ok_and(|n| n == b"Image");
            let mask = stream
                .dict
                .get(b"ImageMask")
                .and_then(Object::as_bool)
                .unwrap_or(false);
            (is_image && !mask).then(|| {
                (
                    number(doc, &stream.dict, b"Width") * number(doc, &stream.dict, b"Height"),
                    stream,
                )
            })
        })
        .max_by_key(|(pixels, _)| *pixels)
        .map(|(_, stream)| stream)
}

fn number(doc: &Document, dict: &Dictionary, key: &[u8]) -> u64 {
    dict.get_deref(key, doc)
        .and_then(Object::as_i64)
        .map_or(0, |n| n.max(0) as u64)
}

fn unsupported(what: &str) -> Refusal {
    Refusal::Unsupported(format!(
        "its pages are pictures in {what}, which Companion does not read yet"
    ))
}

/// One image stream as a picture.
fn picture(doc: &Document, stream: &Stream) -> std::result::Result<PictureData, Refusal> {
    let dict = &stream.dict;
    let (width, height) = (number(doc, dict, b"Width"), number(doc, dict, b"Height"));
    if width == 0 || height == 0 || width > MAX_SIDE || height > MAX_SIDE {
        return Err(Refusal::Damaged(format!(
            "a page picture of {width} × {height} pixels"
        )));
    }
    let filters: Vec<Vec<u8>> = stream
        .filters()
        .map(|f| f.into_iter().map(<[u8]>::to_vec).collect())
        .unwrap_or_default();
    // the general filters lopdf decodes come first; an image codec, if any, last
    let codec = filters
        .iter()
        .find(|f| {
            !matches!(
                f.as_slice(),
                b"FlateDecode" | b"LZWDecode" | b"ASCII85Decode"
            )
        })
        .cloned();
    let data = decoded(stream, MAX_STREAM_BYTES)
        .map_err(|_| Refusal::TooComplex("a page picture inflates too far".into()))?;
    match codec.as_deref() {
        None => {}
        Some(b"DCTDecode") => return Ok(PictureData::File(data)),
        Some(b"JPXDecode") => return Err(unsupported("JPEG 2000")),
        Some(b"CCITTFaxDecode" | b"JBIG2Decode") => {
            return Err(unsupported(
                "black-and-white fax compression (CCITT, JBIG2)",
            ));
        }
        Some(other) => {
            return Err(unsupported(&format!(
                "the `{}` encoding",
                String::from_utf8_lossy(other)
            )));
        }
    }
    let colors = components(doc, dict)?;
    let bits = number(doc, dict, b"BitsPerComponent");
    if !(bits == 8 || (bits == 1 && colors == 1)) {
        return Err(unsupported(&format!("{bits}-bit colour")));
    }
    let row_bytes = (width * colors * bits).div_ceil(8) as usize;
    let data = unpredict(
        doc,
        dict,
        data,
        row_bytes,
        (colors * bits).div_ceil(8) as usize,
    )?;
    if data.len() < row_bytes * height as usize {
        return Err(Refusal::Damaged("a page picture is cut short".into()));
    }
    let inverted = dict
        .get_deref(b"Decode", doc)
        .and_then(Object::as_array)
        .ok()
        .and_then(|d| d.first().and_then(|x| x.as_float().ok()))
        .is_some_and(|first| first > 0.5);
    let mut pixels = Vec::with_capacity((width * height * 3) as usize);
    for row in data.chunks(row_bytes).take(height as usize) {
        for x in 0..width as usize {
            let rgb = match (colors, bits) {
                (1, 1) => {
                    let on = row[x / 8] >> (7 - x % 8) & 1 == 1;
                    let v = if on { 255 } else { 0 };
                    [v; 3]
                }
                (1, _) => [row[x]; 3],
                (3, _) => [row[3 * x], row[3 * x + 1], row[3 * x + 2]],
                _ => {
                    // CMYK, as the simplest conversion does (no colour profile)
                    let c = &row[4 * x..4 * x + 4];
                    let k = 255 - u16::from(c[3]);
                    let ch = |v: u8| ((255 - u16::from(v)) * k / 255) as u8;
                    [ch(c[0]), ch(c[1]), ch(c[2])]
                }
            };
            let rgb = if inverted { rgb.map(|v| 255 - v) } else { rgb };
            pixels.extend_from_slice(&rgb);
        }
    }
    Ok(PictureData::Rgb {
        width: width as u32,
        height: height as u32,
        pixels,
    })
}

/// How many colour components a raw image has: grey 1, RGB 3, CMYK 4 (an ICC profile says its
/// own `N`); indexed and other spaces are refused by name.
fn components(doc: &Document, dict: &Dictionary) -> std::result::Result<u64, Refusal> {
    let space = dict.get_deref(b"ColorSpace", doc).ok();
    let name = match space {
        Some(Object::Name(n)) => n.clone(),
        Some(Object::Array(items)) => match items.first() {
            Some(Object::Name(n)) if n == b"ICCBased" => {
                let n = items
                    .get(1)
                    .and_then(|r| r.as_reference().ok())
                    .and_then(|id| doc.get_object(id).and_then(Object::as_stream).ok())
                    .map_or(0, |s| number(doc, &s.dict, b"N"));
                return match n {
                    1 | 3 | 4 => Ok(n),
                    _ => Err(unsupported("an unusual colour profile")),
                };
            }
            Some(Object::Name(n)) => n.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    match name.as_slice() {
        b"DeviceGray" | b"CalGray" => Ok(1),
        b"DeviceRGB" | b"CalRGB" => Ok(3),
        b"DeviceCMYK" => Ok(4),
        b"Indexed" => Err(unsupported("indexed colour")),
        other => Err(unsupported(&format!(
            "the `{}` colour space",
            String::from_utf8_lossy(other)
        ))),
    }
}

/// Undo a Flate or LZW stream's predictor (`DecodeParms`): none, or PNG's (10-15), each row
/// led by its filter type. TIFF's predictor 2 is refused by name.
fn unpredict(
    doc: &Document,
    dict: &Dictionary,
    data: Vec<u8>,
    row_bytes: usize,
    pixel_bytes: usize,
) -> std::result::Result<Vec<u8>, Refusal> {
    let params = match dict.get_deref(b"DecodeParms", doc) {
        Ok(Object::Dictionary(d)) => Some(d),
        Ok(Object::Array(items)) => items.iter().find_map(|o| o.as_dict().ok()),
        _ => None,
    };
    let predictor = params.map_or(1, |p| number(doc, p, b"Predictor"));
    match predictor {
        0 | 1 => Ok(data),
        10..=15 => Ok(png_unfilter(&data, row_bytes, pixel_bytes.max(1))),
        _ => Err(unsupported("TIFF-predicted pixels")),
    }
}

/// PNG's row filters undone (RFC 2083 §6): each row of `row_bytes` follows its filter byte.
fn png_unfilter(data: &[u8], row_bytes: usize, bpp: usize) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(data.len());
    let mut prev = vec![0u8; row_bytes];
    for chunk in data.chunks(row_bytes + 1) {
        let Some((&kind, row)) = chunk.split_first() else {
            break;
        };
        let mut cur = row.to_vec();
        cur.resize(row_bytes, 0);
        for i in 0..row_bytes {
            let a = if i >= bpp { cur[i - bpp] } else { 0 };
            let b = prev[i];
            let c = if i >= bpp { prev[i - bpp] } else { 0 };
            let add = match kind {
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => paeth(a, b, c),
                _ => 0,
            };
            cur[i] = cur[i].wrapping_add(add);
        }
        out.extend_from_slice(&cur);
        prev = cur;
    }
    out
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = (
        (p - i16::from(a)).abs(),
        (p - i16::from(b)).abs(),
        (p - i16::from(c)).abs(),
    );
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_filters_are_undone_row_by_row() {
        // two rows of 3 grey pixels: "sub" then "up"
        let data = [1, 10, 5, 5, 2, 1, 1, 1];
        assert_eq!(png_unfilter(&data, 3, 1), [10, 15, 20, 11, 16, 21]);
        // "average" and "paeth" against a known row
        let data = [0, 100, 100, 100, 3, 10, 10, 10, 4, 1, 1, 1];
        let out = png_unfilter(&data, 3, 1);
        assert_eq!(&out[3..6], &[60, 90, 105]);
        assert_eq!(paeth(10, 20, 15), 15);
    }
}
