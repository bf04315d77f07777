//! tauri-plugin's build step: it defines `cfg(mobile)`/`cfg(desktop)` and, on a Mac building
//! for iOS, copies Tauri's Swift package beside `ios/` and links the Swift package in `ios/`
//! (its library product is named after this package). On Linux it only checks the manifest.
//!
//! No command is listed: the webview calls none of this plugin; only the app's Rust code does
//! (`run_mobile_plugin` is not subject to the webview's permissions), so none is reachable
//! from JavaScript.
const COMMANDS: &[&str] = &[];

fn main() {
    tauri_plugin::Builder::new(COMMANDS).ios_path("ios").build();
}
