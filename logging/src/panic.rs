//! Panics: a hook that writes every panic, with its backtrace, to the log before the previous
//! hook runs (so a crash leaves a trace even where nothing catches it), and [`catch_panic`],
//! which a thread's boundary uses to turn a panic into a value it can report and go on.

use std::any::Any;
use std::backtrace::Backtrace;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::sync::Once;

thread_local! {
    /// The backtrace of this thread's last panic, taken by the hook for [`catch_panic`].
    static LAST_BACKTRACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A panic caught at a thread's boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panic {
    /// The panic's message (a bug's own words, not user text).
    pub message: String,
    /// Captured by the hook; `None` when the hook is not installed.
    pub backtrace: Option<String>,
}

/// Chain the hook in front of the one installed now (once per process).
pub fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            log_panic(info);
            previous(info);
        }));
    });
}

fn log_panic(info: &PanicHookInfo<'_>) {
    // forced: RUST_BACKTRACE is unset for most users, and a panic without one tells us little
    let backtrace = Backtrace::force_capture().to_string();
    let thread = std::thread::current();
    let message = payload_text(info.payload());
    let location = info.location().map(|l| l.to_string()).unwrap_or_default();
    tracing::error!(
        code = "panic",
        thread = thread.name().unwrap_or("unnamed"),
        %location,
        panic = %message,
        %backtrace,
        "a thread panicked"
    );
    LAST_BACKTRACE.with(|b| *b.borrow_mut() = Some(backtrace));
}

/// The text of a panic's payload (`panic!` gives a `&str` or a `String`).
pub fn payload_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Run `f`, turning a panic into a [`Panic`]. `f`'s captures are asserted unwind-safe: the
/// callers drop or rebuild whatever `f` was changing when it panicked.
pub fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, Panic> {
    LAST_BACKTRACE.with(|b| b.borrow_mut().take());
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|payload| Panic {
        message: payload_text(&*payload),
        backtrace: LAST_BACKTRACE.with(|b| b.borrow_mut().take()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_value_with_its_message() {
        let p = catch_panic(|| -> u32 { panic!("bad index {}", 7) }).unwrap_err();
        assert_eq!(p.message, "bad index 7");
        assert_eq!(catch_panic(|| 3), Ok(3));
    }
}
