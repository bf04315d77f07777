//! Files built to exhaust a reader, made here (no multi-megabyte fixtures): PDF decompression
//! bombs (a page's content stream, an object stream), a form XObject that draws itself, forms
//! that each draw the next twice, deeply nested PDF arrays and dictionaries, and HTML with
//! thousands of nested elements of the kinds html5ever handles slowest. Each is refused with
//! `document_too_complex` (or read, where the parser bounds it itself), never overflowing the
//! stack, and the bomb within a memory bound far below what it inflates to.

use std::io::Write;
use std::path::Path;

use documents::extract_bytes;

use crate::pdf_writer::{pdf, stream};

/// `n` MiB of `byte`, zlib-compressed (about 1,000 to 1).
fn zlib_of(byte: u8, mib: usize) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![byte; 1 << 20];
    for _ in 0..mib {
        e.write_all(&chunk).unwrap();
    }
    e.finish().unwrap()
}

/// One page drawing `content`, with `resources` (objects 1–5), then `extra` objects (6, 7, …).
fn page_pdf(content: Vec<u8>, resources: &str, extra: Vec<Vec<u8>>) -> Vec<u8> {
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
             /Resources << /Font << /F1 5 0 R >> {resources} >> >>"
        )
        .into_bytes(),
        content,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ];
    objects.extend(extra);
    pdf(&objects)
}

const TEXT: &[u8] = b"BT /F1 12 Tf 72 712 Td (Hello from a lighthouse) Tj ET";

fn form(draws: &str, resources: &str) -> Vec<u8> {
    let body = format!("BT /F1 12 Tf (ha) Tj ET {draws}");
    stream(
        &format!(
            "/Type /XObject /Subtype /Form /BBox [0 0 10 10] \
             /Resources << /Font << /F1 5 0 R >> {resources} >>"
        ),
        body.as_bytes(),
    )
}

fn refused(name: &str, bytes: &[u8]) -> String {
    match extract_bytes(Path::new(name), bytes) {
        Err(e) => {
            assert_eq!(e.code(), "document_too_complex", "{e}");
            let message = e.to_string();
            assert_eq!(message.lines().count(), 1, "{message}");
            message
        }
        Ok(x) => panic!("read {} characters of a hostile file", x.text.len()),
    }
}

/// Peak resident memory of this process so far (Linux).
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[test]
fn an_ordinary_pdf_and_its_forms_are_read() {
    let bytes = page_pdf(
        stream("", &[TEXT, b" /X Do /X Do"].concat()),
        "/XObject << /X 6 0 R >>",
        vec![form("", "")],
    );
    let text = extract_bytes(Path::new("x.pdf"), &bytes).unwrap().text;
    assert!(text.contains("Hello from a lighthouse"), "{text:?}");
    assert_eq!(text.matches("ha").count(), 2, "{text:?}");
}

/// 1 GiB of spaces in a 1 MB file: today's reader took 2.1 GB of memory for it.
#[test]
fn a_pdf_decompression_bomb_is_refused_in_bounded_memory() {
    let bomb = zlib_of(b' ', 1024);
    assert!(bomb.len() < 2 << 20);
    let bytes = page_pdf(stream("/Filter /FlateDecode", &bomb), "", vec![]);
    let message = refused("bomb.pdf", &bytes);
    assert!(message.contains("inflates past"), "{message}");
    // the same bomb as an object stream, which lopdf inflates while it loads the file
    let objstm = stream("/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode", &bomb);
    let bytes = page_pdf(stream("", TEXT), "", vec![objstm]);
    refused("objstm.pdf", &bytes);
    if let Some(peak) = peak_rss_bytes() {
        assert!(peak < 512 << 20, "peak RSS {} MB", peak >> 20);
    }
}

#[test]
fn a_form_that_draws_itself_is_refused_not_a_stack_overflow() {
    let bytes = page_pdf(
        stream("", b"/X Do"),
        "/XObject << /X 6 0 R >>",
        vec![form("/X Do", "/XObject << /X 6 0 R >>")],
    );
    let message = refused("loop.pdf", &bytes);
    assert!(message.contains("draws itself"), "{message}");
}

/// Forms 6, 7, …: each draws the next twice, so the page draws the last one 2^depth times.
fn doubling_forms(depth: usize) -> Vec<u8> {
    let forms = (0..depth)
        .map(|i| {
            if i + 1 < depth {
                form("/X Do /X Do", &format!("/XObject << /X {} 0 R >>", 7 + i))
            } else {
                form("", "")
            }
        })
        .collect();
    page_pdf(stream("", b"/X Do"), "/XObject << /X 6 0 R >>", forms)
}

/// A page that is its own parent, with its resources but no media box: pdf-extract looks the
/// box up through the parents by recursion, which never ends (found by the fuzzer).
#[test]
fn a_page_that_is_its_own_parent_is_refused_not_a_stack_overflow() {
    let bytes = pdf(&[
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 3 0 R /Contents 4 0 R \
          /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_vec(),
        stream("", TEXT),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ]);
    let message = refused("loop.pdf", &bytes);
    assert!(message.contains("page tree loops"), "{message}");
}

#[test]
fn forms_that_multiply_the_work_are_refused() {
    // 2^24 draws of a tiny form (the walk is memoized, so the estimate costs nothing)
    let message = refused("laughs.pdf", &doubling_forms(24));
    assert!(message.contains("times"), "{message}");
    // nested past the depth any real document uses
    let message = refused("deep.pdf", &doubling_forms(40));
    assert!(message.contains("nest"), "{message}");
    // and a modest fan-out is read
    let text = extract_bytes(Path::new("ok.pdf"), &doubling_forms(6))
        .unwrap()
        .text;
    assert_eq!(text.matches("ha").count(), 63, "{text:?}");
}

#[test]
fn deeply_nested_pdf_objects_never_overflow_the_stack() {
    let n = 100_000;
    let array = [vec![b'['; n], vec![b']'; n]].concat();
    let mut dict = b"<< /A ".repeat(n);
    dict.extend(b"1");
    dict.extend(b" >>".repeat(n));
    let content = [TEXT, b" [", &vec![b'['; n], &vec![b']'; n], b"] pop"].concat();
    for bytes in [
        page_pdf(stream("", TEXT), "/Extra 6 0 R", vec![array]),
        page_pdf(stream("", TEXT), "/Extra 6 0 R", vec![dict]),
        page_pdf(stream("", &content), "", vec![]),
    ] {
        // lopdf stops nesting at 100 levels: the object is dropped or the file refused
        if let Err(e) = extract_bytes(Path::new("nested.pdf"), &bytes) {
            assert!(
                matches!(e.code(), "document_bad_pdf" | "document_too_complex"),
                "{e}"
            );
        }
    }
}

#[test]
fn deeply_nested_html_is_refused_quickly_whatever_the_elements() {
    for (open, close, n) in [
        ("<div>", "</div>", 100_000),
        ("<ul><li>", "", 50_000),
        ("<span>", "", 100_000),
        ("<table><tr><td>", "", 20_000),
        ("<i><b><u><s>", "", 50_000),
        ("<svg>", "", 100_000),
    ] {
        let page = format!("<html><body>{}deep{}", open.repeat(n), close.repeat(n));
        let message = refused("nested.html", page.as_bytes());
        assert!(message.contains("nest"), "{open}: {message}");
    }
    // a page as deep as real ones get is read
    let page = format!("<html><body>{}deep", "<div>".repeat(300));
    let text = extract_bytes(Path::new("ok.html"), page.as_bytes())
        .unwrap()
        .text;
    assert!(text.contains("deep"));
}

#[test]
fn a_page_of_millions_of_elements_is_refused_before_it_takes_gigabytes() {
    let page = format!("<html><body>{}", "<br>".repeat(2_100_000));
    let message = refused("wide.html", page.as_bytes());
    assert!(message.contains("elements"), "{message}");
}

/// Found by `scripts/fuzz` (target `documents`): a page whose font refers to an object the
/// file does not have. pdf-extract panics on it ("missing object reference"); the extractor
/// must turn that into a clear refusal, never a crash.
#[test]
fn a_pdf_that_refers_to_a_missing_object_is_refused_as_damaged() {
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/documents/fuzz-missing-object.pdf"),
    )
    .unwrap();
    let err = extract_bytes(Path::new("found-by-fuzzing.pdf"), &bytes).unwrap_err();
    assert!(matches!(err, documents::Error::Pdf { .. }), "{err}");
    assert!(err.to_string().contains("found-by-fuzzing.pdf"), "{err}");
}
