//! A GGUF header of any bytes: the bounded parser, then the architecture description and the
//! tensor bounds, exactly as opening a model file runs them. Nothing may panic or hang.

pub fn check(data: &[u8]) {
    let _ = engine::ModelArch::check_header(data);
}
