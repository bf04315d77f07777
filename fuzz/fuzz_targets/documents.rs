//! The documents target: see `checks/documents.rs`.
#![no_main]

use std::sync::Once;

#[path = "../checks/documents.rs"]
mod check;

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

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pass_over_contained_pdf_panics();
    check::check(data);
});
