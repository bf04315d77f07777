//! Extraction of the shipped fixtures (tests/fixtures/documents) and of the inputs that must be
//! refused, each with its own error.

use std::path::{Path, PathBuf};

use documents::{Error, Format, extract, extract_bytes};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/documents")
        .join(name)
}

#[test]
fn a_pdf_gives_its_text_layer_in_reading_order() {
    let doc = extract(&fixture("lighthouse.pdf")).unwrap();
    assert_eq!(doc.format, Format::Pdf);
    let harbour = doc.text.find("The Harbour Light").expect("page 1");
    let museum = doc.text.find("small museum").expect("page 2");
    assert!(harbour < museum);
    assert!(doc.text.contains("Margaret Ann"), "{}", doc.text);
    assert_eq!(doc.sha256.len(), 64);
}

#[test]
fn a_gb18030_chinese_text_is_decoded() {
    let doc = extract(&fixture("longjing-gb18030.txt")).unwrap();
    // chardetng names the family GBK; encoding_rs decodes GB18030 through it
    assert_eq!(doc.encoding, Some("GBK"));
    assert!(doc.text.starts_with("西湖龙井茶的故事"), "{}", doc.text);
    assert!(doc.text.contains("乾隆皇帝六次南巡"));
}

#[test]
fn html_loses_scripts_styles_and_tags_and_keeps_entities_decoded() {
    let doc = extract(&fixture("report.html")).unwrap();
    assert_eq!(doc.format, Format::Html);
    let t = &doc.text;
    assert!(t.contains("Field notes & observations"), "{t}");
    assert!(
        t.contains("1.2\u{a0}m above its usual level — the highest"),
        "{t}"
    );
    assert!(
        t.contains("café by the landing stayed open <all night>"),
        "{t}"
    );
    assert!(t.contains("84 mm"));
    for hidden in ["DO-NOT-SHOW", "also hidden", "font-family", "<p>"] {
        assert!(!t.contains(hidden), "{hidden} leaked into {t}");
    }
}

#[test]
fn utf16_and_utf8_bom_files_are_read() {
    let text = "Größe: 十二 cm.\n\nZweiter Absatz.";
    let mut le = vec![0xFF, 0xFE];
    le.extend(text.encode_utf16().flat_map(|u| u.to_le_bytes()));
    let doc = extract_bytes(Path::new("n.txt"), &le).unwrap();
    assert_eq!((doc.text.as_str(), doc.encoding), (text, Some("UTF-16LE")));
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend(text.as_bytes());
    assert_eq!(extract_bytes(Path::new("n.md"), &bom).unwrap().text, text);
    // windows-1252 bytes of the Latin part (that code page has no CJK)
    let latin1: Vec<u8> = text
        .chars()
        .filter(|c| (*c as u32) < 0x100)
        .map(|c| c as u32 as u8)
        .collect();
    let doc = extract_bytes(Path::new("n.txt"), &latin1).unwrap();
    assert!(doc.text.starts_with("Größe"), "{}", doc.text);
}

#[test]
fn bad_inputs_get_their_own_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    let err = extract(&empty).unwrap_err();
    assert!(matches!(err, Error::Empty { .. }), "{err}");
    assert!(err.to_string().ends_with("empty.txt is empty"), "{err}");

    let blank = dir.path().join("blank.md");
    std::fs::write(&blank, b" \n\n\t \r\n").unwrap();
    assert!(matches!(extract(&blank).unwrap_err(), Error::NoText { .. }));

    let binary = dir.path().join("photo.txt");
    std::fs::write(&binary, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00").unwrap();
    let err = extract(&binary).unwrap_err();
    assert!(matches!(err, Error::Binary { .. }), "{err}");
    assert!(err.to_string().contains("binary file"), "{err}");

    let err = extract(&fixture("scanned.pdf")).unwrap_err();
    assert!(matches!(err, Error::NoText { .. }), "{err}");
    assert!(err.to_string().contains("scanned"), "{err}");

    let fake = dir.path().join("fake.pdf");
    std::fs::write(&fake, b"this is not a pdf at all").unwrap();
    let err = extract(&fake).unwrap_err();
    assert!(matches!(err, Error::Pdf { .. }), "{err}");

    let err = extract(&dir.path().join("missing.txt")).unwrap_err();
    assert!(matches!(err, Error::Unreadable { .. }), "{err}");
    assert!(matches!(
        extract(dir.path()).unwrap_err(),
        Error::Unreadable { .. }
    ));
}

#[test]
fn a_file_without_a_known_extension_is_sniffed() {
    let html = b"<!doctype html><p>Hello &amp; welcome</p>";
    let doc = extract_bytes(Path::new("page"), html).unwrap();
    assert_eq!(
        (doc.format, doc.text.as_str()),
        (Format::Html, "Hello & welcome")
    );
    let pdf = std::fs::read(fixture("lighthouse.pdf")).unwrap();
    assert_eq!(
        extract_bytes(Path::new("download"), &pdf).unwrap().format,
        Format::Pdf
    );
}

/// A text file several blocks long, in three encodings: the stream of pieces is the whole
/// text (characters cut by block ends included), and what identifies the file is its bytes.
#[test]
fn a_long_text_file_is_read_as_a_stream_equal_to_the_whole() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let paragraph = "Café crème, déjà vu — naïve façade; the end of a line.  \r\nNext line.\n\n\n";
    let text: String = (0..4000).map(|i| format!("{i}. {paragraph}")).collect();
    assert!(text.len() > 5 * 64 * 1024);
    let expected = documents::normalize::normalize(&text);
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain(text.encode_utf16().flat_map(|u| u.to_le_bytes()))
        .collect();
    let (latin, _, lossy) = encoding_rs::WINDOWS_1252.encode(&text);
    assert!(!lossy);
    for (name, bytes, encoding) in [
        ("utf8.txt", text.as_bytes().to_vec(), "UTF-8"),
        ("utf16.txt", utf16, "UTF-16LE"),
        ("latin.md", latin.into_owned(), "windows-1252"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let doc = documents::Document::open(&path).unwrap();
        assert_eq!(doc.encoding, Some(encoding), "{name}");
        assert_eq!(doc.byte_count, bytes.len() as u64);
        let sha: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(doc.sha256, sha);
        let mut stream = doc.text().unwrap();
        let (mut joined, mut pieces) = (String::new(), 0);
        while let Some(piece) = stream.next_piece().unwrap() {
            assert!(
                piece.len() <= 4 * 64 * 1024,
                "{name}: {} bytes",
                piece.len()
            );
            joined.push_str(&piece);
            pieces += 1;
        }
        assert!(pieces >= 4, "{name}: {pieces} pieces");
        assert!(joined == expected, "{name}: the streamed text differs");
    }
}

/// HTML and PDF are parsed whole, so a huge one is refused rather than read into memory; a
/// text file of the same size is not.
#[test]
fn an_html_or_pdf_file_too_large_to_parse_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let size = documents::document::MAX_PARSED_BYTES + 1;
    for name in ["big.html", "big.pdf"] {
        let path = dir.path().join(name);
        // a sparse file: no disk or memory is spent on it
        std::fs::File::create(&path).unwrap().set_len(size).unwrap();
        let err = extract(&path).unwrap_err();
        assert!(matches!(err, Error::TooLarge { .. }), "{name}: {err}");
        assert!(err.to_string().contains(".txt"), "{err}");
        assert_eq!(err.code(), "document_too_large");
    }
}
