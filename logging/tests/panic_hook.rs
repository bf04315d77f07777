//! The installed log in its own process (a process has one global subscriber and one panic
//! hook): a panic on any thread is written to the log file with its backtrace, before the
//! previous hook runs, and the default levels hold our info lines and not a dependency's.

use std::sync::atomic::{AtomicBool, Ordering};

static PREVIOUS_RAN: AtomicBool = AtomicBool::new(false);

#[inline(never)]
fn a_function_that_panics() {
    panic!("a bug for the test");
}

#[test]
fn a_panic_on_another_thread_is_logged_with_its_backtrace() {
    // SAFETY: set before any other thread of this test process reads the environment
    unsafe {
        std::env::remove_var("COMPANION_LOG");
        std::env::remove_var("RUST_LOG");
    }
    std::panic::set_hook(Box::new(|_| PREVIOUS_RAN.store(true, Ordering::SeqCst)));
    let dir = tempfile::tempdir().unwrap();
    let logger = logging::install(dir.path()).unwrap();
    assert_eq!(logger.path(), dir.path().join("companion.log"));
    assert!(matches!(
        logging::install(dir.path()),
        Err(logging::Error::AlreadyInstalled)
    ));

    let joined = std::thread::Builder::new()
        .name("companion-test".into())
        .spawn(|| logging::catch_panic(a_function_that_panics).unwrap_err())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(joined.message, "a bug for the test");
    let backtrace = joined.backtrace.expect("the hook took the backtrace");
    assert!(backtrace.contains("a_function_that_panics"), "{backtrace}");
    assert!(PREVIOUS_RAN.load(Ordering::SeqCst), "the previous hook ran");

    tracing::info!(target: "engine", "an engine line");
    tracing::debug!(target: "engine", "a debug line");
    tracing::info!(target: "hyper", "a dependency's line");
    let log = std::fs::read_to_string(logger.path()).unwrap();
    let panic_line = log
        .lines()
        .find(|l| l.contains("a thread panicked"))
        .unwrap_or_else(|| panic!("no panic line in:\n{log}"));
    assert!(panic_line.contains("ERROR"), "{panic_line}");
    assert!(panic_line.contains("code=\"panic\""), "{panic_line}");
    assert!(panic_line.contains("companion-test"), "{panic_line}");
    assert!(panic_line.contains("a bug for the test"), "{panic_line}");
    assert!(
        log.contains("a_function_that_panics"),
        "backtrace missing:\n{log}"
    );
    assert!(log.contains("an engine line"));
    assert!(!log.contains("a debug line"));
    assert!(!log.contains("a dependency's line"));
}
