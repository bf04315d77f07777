//! A document of any bytes as text (every encoding), HTML, Markdown or PDF: extracted or
//! refused, never a panic; the first byte picks the kind.
#![no_main]

use std::path::Path;
use std::sync::Once;

use libfuzzer_sys::fuzz_target;

/// pdf-extract panics on some malformed files, by design of documents/src/pdf.rs caught on
/// its "pdf-extract" thread and turned into `Error::Pdf`. libFuzzer's panic hook aborts on
/// every panic, caught or not, so it is told to pass over that thread's panics only: a panic
/// anywhere else (or one escaping the catch) still aborts and is reported.
fn pass_over_contained_pdf_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() != Some("pdf-extract") {
                fuzzer_hook(info);
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    pass_over_contained_pdf_panics();
    let Some((&kind, body)) = data.split_first() else { return };
    let name = match kind % 4 {
        0 => "doc.txt",
        1 => "doc.md",
        2 => "doc.html",
        _ => "doc.pdf",
    };
    let path = Path::new(name);
    let _ = documents::extract_bytes(path, body);
    if let Ok(doc) = documents::Document::from_bytes(path, body.to_vec()) {
        let _ = doc.read_to_string();
    }
});
