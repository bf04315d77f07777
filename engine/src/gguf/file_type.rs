//! Display names of `general.file_type` (llama.cpp's `llama_ftype`).

/// llama.cpp's `llama_ftype` names for `general.file_type`.
pub fn file_type_label(ft: Option<u32>) -> &'static str {
    match ft {
        Some(0) => "F32",
        Some(1) => "F16",
        Some(2) => "Q4_0",
        Some(3) => "Q4_1",
        Some(7) => "Q8_0",
        Some(8) => "Q5_0",
        Some(9) => "Q5_1",
        Some(10) => "Q2_K",
        Some(11) => "Q3_K_S",
        Some(12) => "Q3_K_M",
        Some(13) => "Q3_K_L",
        Some(14) => "Q4_K_S",
        Some(15) => "Q4_K_M",
        Some(16) => "Q5_K_S",
        Some(17) => "Q5_K_M",
        Some(18) => "Q6_K",
        Some(32) => "BF16",
        _ => "unknown",
    }
}
