//! The commands the webview may call, one file per area. `frontend/src/types.ts` is the other
//! half of the contract; `build.rs` lists the same names so capabilities can allow them.

pub mod agent;
pub mod app;
pub mod chat;
pub mod conversations;
pub mod documents;
pub mod logs;
pub mod model;
pub mod pictures;
pub mod servers;
pub mod settings;
pub mod sync;
