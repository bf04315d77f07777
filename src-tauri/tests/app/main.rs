//! The app's integration tests, one test binary (one link, one optimized build, instead of one
//! per file): the commands on Tauri's mock runtime (`commands`), the iOS bridge on the plugin's
//! fake OS (`mobile`), and the built app in WebKitGTK over WebDriver (`e2e`, `agent_e2e`; they
//! take turns, see `support::webdriver`). `cargo test --release -p companion-app --test app -- MODULE::`.

mod agent_e2e;
mod commands;
mod e2e;
mod mobile;
mod support;
mod sync_e2e;
