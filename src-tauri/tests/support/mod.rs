//! Helpers shared by the app's integration tests (each tests/*.rs declares `mod support;`).
pub mod webdriver;
