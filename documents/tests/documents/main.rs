//! The documents crate's public behaviour, one test binary; a module per concern:
//! `cargo test -p companion-documents --test documents -- MODULE::`.

mod extract;
mod hostile;
mod pdf_writer;
mod scanned;
