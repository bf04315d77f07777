//! Standard output when its reader may leave early: `companion generate … | head -1`,
//! `companion conversations list | head`.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with `io::ErrorKind::BrokenPipe`, and
//! `println!` panics on that failure. Commands therefore write with [`outln!`] (or `writeln!`)
//! and pass the error up; streaming commands write through [`Stream`], which stops the
//! generation once nobody reads it; and `main` ends quietly with status 0 when the error is
//! only that the reader left ([`reader_left`]; ripgrep's rule, since the reader got what it
//! asked for). `serve` ignores the failure instead: a server outlives whoever read its banner.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// `println!` that returns the write's `io::Result` instead of panicking.
macro_rules! outln {
    () => {{
        use std::io::Write as _;
        writeln!(std::io::stdout())
    }};
    ($($arg:tt)+) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)+)
    }};
}
pub(crate) use outln;

/// Whether `e` means only that standard output's reader has gone.
pub fn reader_left(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Text streamed to standard output piece by piece. The first failed write cancels the
/// generation behind it (`cancel`, when given): its reader is gone, so decoding more is wasted.
/// The failure is kept for [`Stream::finish`] rather than lost.
pub struct Stream {
    cancel: Option<Arc<AtomicBool>>,
    failed: Option<io::Error>,
}

impl Stream {
    pub fn new(cancel: Option<Arc<AtomicBool>>) -> Self {
        Self {
            cancel,
            failed: None,
        }
    }

    /// Write `piece` and flush it, so the reader sees text as it is generated.
    pub fn piece(&mut self, piece: &str) {
        if self.failed.is_some() {
            return;
        }
        let mut out = io::stdout().lock();
        if let Err(e) = out.write_all(piece.as_bytes()).and_then(|()| out.flush()) {
            if let Some(cancel) = &self.cancel {
                cancel.store(true, Ordering::Relaxed);
            }
            self.failed = Some(e);
        }
    }

    /// The first write failure, if any.
    pub fn finish(self) -> io::Result<()> {
        self.failed.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_anywhere_in_the_chain_means_the_reader_left() {
        let pipe = io::Error::new(io::ErrorKind::BrokenPipe, "closed");
        let e = anyhow::Error::new(pipe).context("cannot print the list");
        assert!(reader_left(&e));
        let other = anyhow::Error::new(io::Error::other("disk full"));
        assert!(!reader_left(&other));
        assert!(!reader_left(&anyhow::anyhow!("no model")));
    }
}
