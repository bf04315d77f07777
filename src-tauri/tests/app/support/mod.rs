//! Helpers shared by the app's integration tests.
pub mod notifications;
pub mod webdriver;
