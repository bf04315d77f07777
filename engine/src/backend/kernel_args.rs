//! The kernels' argument structs as Rust writes them: `repr(C)` twins of the structs in
//! `engine/cuda/decode.cu` and `engine/metal/decode.metal`, field for field, pointers as
//! 64-bit device addresses (Metal: `gpuAddress`). A struct passed to a kernel is copied
//! byte for byte, so a field out of step on either side is read as garbage by the GPU; the
//! test below lays out each struct of the kernel sources by C's rules and compares it with
//! these, on every build (no GPU needed).
// Every build compiles all of them, for the test; a CUDA build uses only CUDA's, a Metal
// build only Metal's.
#![allow(dead_code)]

/// `Mat`: one matrix of a `matvec3` launch.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Mat {
    pub w: u64,
    pub out: u64,
    pub ty: i32,
    pub rows: i32,
}

/// `Attn`: one layer's attention (QK-norm, RoPE, cache write, split attention), with device
/// addresses for pointers (Metal: `gpuAddress`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Attn {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub q_norm: u64,
    pub k_norm: u64,
    pub v_norm: i32,
    pub cos: u64,
    pub sin: u64,
    pub n_rot: i32,
    pub k_cache: u64,
    pub v_cache: u64,
    pub slots: i32,
    pub sliding: i32,
    pub window: i32,
    pub n_head: i32,
    pub n_kv: i32,
    pub hd: i32,
    pub q_scale: f32,
    pub softcap: f32,
    pub eps: f32,
    pub partial: u64,
    pub splits: i32,
}

/// `EmbedArgs` (Metal; CUDA takes these as separate arguments).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct EmbedArgs {
    pub ty: i32,
    pub n_embd: i32,
    pub scale: f32,
    pub eps: f32,
}

/// `Mats`: up to three matrices of one `matvec3` dispatch (Metal; CUDA passes three `Mat`s).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Mats {
    pub m: [Mat; 3],
    pub n_mats: i32,
    pub k: i32,
}

/// `GateUpArgs` (Metal).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct GateUpArgs {
    pub gate_type: i32,
    pub up_type: i32,
    pub k: i32,
    pub has_out: i32,
}

/// `JoinArgs` (Metal).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct JoinArgs {
    pub splits: i32,
    pub hd: i32,
    pub has_out: i32,
}

/// `AddNormArgs` (Metal).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct AddNormArgs {
    pub eps: f32,
    pub scale: f32,
    pub n: i32,
    pub has_post: i32,
    pub has_hidden: i32,
}

/// `PenaltyArgs` (Metal).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct PenaltyArgs {
    pub window: i32,
    pub repeat: f32,
    pub presence: f32,
}

/// `TopArgs` (Metal).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct TopArgs {
    pub n: i32,
    pub k: i32,
    pub softcap: f32,
}

/// Metal's `Sampling`: the chain, with the candidate count and the penalty window.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct SamplingArgs {
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub n_draws: i32,
    pub n_cand: i32,
    pub window: i32,
    pub pad: i32,
}

/// CUDA's `Sampling`: the chain and where the draws are.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CudaSampling {
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub draws: u64,
    pub n_draws: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    static METAL: &str = include_str!("../../metal/decode.metal");
    static CUDA: &str = include_str!("../../cuda/decode.cu");

    /// Each field's offset and size, and the size and alignment of `struct name` in a kernel
    /// source, by C's layout rules (which Metal's and CUDA's compilers follow for these):
    /// each field at the next multiple of its alignment, the size rounded up to the largest.
    fn c_layout(source: &str, name: &str) -> (Vec<(usize, usize)>, usize, usize) {
        let open = format!("struct {name} {{");
        let start = source
            .find(&open)
            .unwrap_or_else(|| panic!("no `{open}` in the source"));
        let body = &source[start + open.len()..];
        let body = &body[..body.find("};").expect("the struct ends")];
        let body: String = body
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(" ");
        let (mut offsets, mut end, mut max_align) = (Vec::new(), 0usize, 1usize);
        for decl in body.split(';').map(str::trim).filter(|d| !d.is_empty()) {
            let mut parts = decl.split(',');
            let first: Vec<String> = parts
                .next()
                .unwrap_or("")
                .replace('*', " * ")
                .split_whitespace()
                .map(str::to_string)
                .collect();
            let qualifiers = ["device", "constant", "threadgroup", "const"];
            let words: Vec<&String> = first
                .iter()
                .filter(|w| !qualifiers.contains(&w.as_str()))
                .collect();
            let base = words.first().expect("a type").to_string();
            let mut declarators = vec![
                words[1..]
                    .iter()
                    .map(|w| w.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            ];
            declarators.extend(parts.map(|p| p.trim().to_string()));
            for d in declarators {
                let pointer = d.contains('*');
                let name = d.replace('*', "");
                let count = match (name.find('['), name.find(']')) {
                    (Some(a), Some(b)) => name[a + 1..b].trim().parse().expect("an array length"),
                    _ => 1,
                };
                let (size, align) = if pointer {
                    (8, 8)
                } else {
                    match base.as_str() {
                        "int" | "uint" | "float" | "int32_t" | "uint32_t" => (4, 4),
                        "half" => (2, 2),
                        "half2" => (4, 4),
                        "char" | "uchar" | "int8_t" | "uint8_t" => (1, 1),
                        nested => {
                            let (_, size, align) = c_layout(source, nested);
                            (size, align)
                        }
                    }
                };
                end = end.next_multiple_of(align);
                offsets.push((end, size * count));
                end += size * count;
                max_align = max_align.max(align);
            }
        }
        (offsets, end.next_multiple_of(max_align), max_align)
    }

    fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
        std::mem::size_of::<F>()
    }

    /// The Rust side: each listed field's offset and size, and the struct's size.
    macro_rules! rust_layout {
        ($t:ty: $($f:ident),+) => {
            (
                vec![$((std::mem::offset_of!($t, $f), field_size(|s: &$t| &s.$f))),+],
                std::mem::size_of::<$t>(),
            )
        };
    }

    fn check(source: &str, name: &str, (offsets, size): (Vec<(usize, usize)>, usize)) {
        let (c_offsets, c_size, _) = c_layout(source, name);
        assert_eq!(
            c_offsets, offsets,
            "(offset, size) of each field of `{name}`"
        );
        assert_eq!(c_size, size, "size of `{name}`");
    }

    /// `Attn` is the same struct on both GPUs.
    fn attn_layout() -> (Vec<(usize, usize)>, usize) {
        rust_layout!(Attn: q, k, v, q_norm, k_norm, v_norm, cos, sin, n_rot, k_cache, v_cache,
            slots, sliding, window, n_head, n_kv, hd, q_scale, softcap, eps, partial, splits)
    }

    #[test]
    fn argument_structs_match_the_metal_kernels_field_for_field() {
        check(METAL, "Mat", rust_layout!(Mat: w, out, ty, rows));
        check(METAL, "Mats", rust_layout!(Mats: m, n_mats, k));
        check(METAL, "Attn", attn_layout());
        check(
            METAL,
            "EmbedArgs",
            rust_layout!(EmbedArgs: ty, n_embd, scale, eps),
        );
        check(
            METAL,
            "GateUpArgs",
            rust_layout!(GateUpArgs: gate_type, up_type, k, has_out),
        );
        check(
            METAL,
            "JoinArgs",
            rust_layout!(JoinArgs: splits, hd, has_out),
        );
        check(
            METAL,
            "AddNormArgs",
            rust_layout!(AddNormArgs: eps, scale, n, has_post, has_hidden),
        );
        check(
            METAL,
            "PenaltyArgs",
            rust_layout!(PenaltyArgs: window, repeat, presence),
        );
        check(METAL, "TopArgs", rust_layout!(TopArgs: n, k, softcap));
        check(
            METAL,
            "Sampling",
            rust_layout!(SamplingArgs: temperature, top_k, top_p, min_p, n_draws, n_cand, window, pad),
        );
    }

    #[test]
    fn argument_structs_match_the_cuda_kernels_field_for_field() {
        check(CUDA, "Mat", rust_layout!(Mat: w, out, ty, rows));
        check(CUDA, "Attn", attn_layout());
        check(
            CUDA,
            "Sampling",
            rust_layout!(CudaSampling: temperature, top_k, top_p, min_p, draws, n_draws),
        );
    }

    #[test]
    fn the_layout_reader_sees_padding_and_nested_structs() {
        let source = "struct In { half a; int b; };\nstruct Out { char c; In in[2]; device const float *p, *q; };";
        assert_eq!(c_layout(source, "In"), (vec![(0, 2), (4, 4)], 8, 4));
        // c at 0, in[2] at 4 (8 bytes each), p at 24 (8-aligned), q at 32; size 40
        let fields = vec![(0, 1), (4, 16), (24, 8), (32, 8)];
        assert_eq!(c_layout(source, "Out"), (fields, 40, 8));
    }
}
