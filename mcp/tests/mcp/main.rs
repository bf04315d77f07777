//! The MCP client against servers nobody here wrote — the reference servers from npm — and a
//! hostile one of our own that misbehaves in every way the issue names.

mod common;
mod hostile;
mod reference;
