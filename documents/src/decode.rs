//! Bytes to text: a byte-order mark wins (UTF-8, UTF-16LE/BE, as the WHATWG Encoding Standard
//! orders it), then valid UTF-8, then a guess among the legacy encodings (windows-125x, GBK,
//! Shift_JIS, EUC-KR, Big5, …) by `chardetng`, the detector Firefox uses; decoding itself is
//! `encoding_rs`, Firefox's implementation of that standard. A file that looks like binary data
//! is refused rather than decoded into noise.

use encoding_rs::{Encoding, UTF_8};

/// How much of the start of a file decides whether it is binary.
const SNIFF_BYTES: usize = 8192;

/// Text and the name of the encoding it was decoded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub text: String,
    pub encoding: &'static str,
}

/// Whether the start of `bytes` looks like binary data: a NUL byte (never in text outside
/// UTF-16, which is recognised by its byte-order mark before this is asked), or many control
/// characters other than the whitespace ones.
pub fn looks_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    if head.contains(&0) {
        return true;
    }
    let controls = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x0c | 0x1b))
        .count();
    // a few stray form feeds or escapes happen in real text files; a tenth does not
    controls * 10 > head.len()
}

/// Decode `bytes` to text, or `None` when they look like binary data.
pub fn decode(bytes: &[u8]) -> Option<Decoded> {
    if let Some((encoding, bom_len)) = Encoding::for_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(&bytes[bom_len..]);
        return Some(Decoded {
            text: text.into_owned(),
            encoding: encoding.name(),
        });
    }
    if looks_binary(bytes) {
        return None;
    }
    let encoding = match std::str::from_utf8(bytes) {
        Ok(_) => UTF_8,
        Err(_) => {
            let mut detector =
                chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
            detector.feed(bytes, true);
            detector.guess(None, chardetng::Utf8Detection::Allow)
        }
    };
    let (text, _) = encoding.decode_without_bom_handling(bytes);
    Some(Decoded {
        text: text.into_owned(),
        encoding: encoding.name(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boms_pick_the_encoding_and_are_dropped() {
        assert_eq!(decode(b"\xEF\xBB\xBFhi").unwrap().text, "hi");
        let le: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain("héllo".encode_utf16().flat_map(|u| u.to_le_bytes()))
            .collect();
        let d = decode(&le).unwrap();
        assert_eq!((d.text.as_str(), d.encoding), ("héllo", "UTF-16LE"));
        let be: Vec<u8> = [0xFE, 0xFF]
            .into_iter()
            .chain("日本".encode_utf16().flat_map(|u| u.to_be_bytes()))
            .collect();
        assert_eq!(decode(&be).unwrap().text, "日本");
    }

    #[test]
    fn legacy_encodings_are_guessed() {
        let (latin, _, _) = encoding_rs::WINDOWS_1252.encode("Café crème, déjà vu — naïve façade.");
        let d = decode(&latin).unwrap();
        assert_eq!(d.text, "Café crème, déjà vu — naïve façade.");
        let (sjis, _, _) = encoding_rs::SHIFT_JIS
            .encode("これは日本語の文章です。吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。");
        let d = decode(&sjis).unwrap();
        assert_eq!(d.encoding, "Shift_JIS");
        assert!(d.text.starts_with("これは日本語の文章です。"));
    }

    #[test]
    fn binary_is_refused() {
        assert!(decode(b"\x7fELF\x02\x01\x01\x00\x00\x00").is_none());
        assert!(decode(&[1u8, 2, 3, 4, 5, 6, 7, 8, 14, 15]).is_none());
        assert!(decode(b"plain text\twith a tab\n").is_some());
    }
}
