//! Helpers shared by the app's integration tests (each tests/*.rs declares `mod support;`).
pub mod webdriver;
// used by the agent's test only; the others would warn that it is never used
#[allow(dead_code)]
pub mod notifications;
