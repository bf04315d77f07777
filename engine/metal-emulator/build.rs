//! The emulated Metal device's build (engine/build.rs includes this with the `metal-emulated`
//! feature): every `engine/metal/*.metal` is rewritten into C++ line for line (so the
//! compiler's messages and the runtime's divergence reports name the .metal file's own lines),
//! a table of its kernels by host name is appended, and clang compiles it with the runtime
//! (runtime.cpp) against the executing <metal_stdlib> beside this file.
//!
//! The rewrites, all mechanical (scripts/check-metal makes the first and the third too):
//! - `[[...]]` attributes are dropped (they are read first: the table's wrappers bind each
//!   parameter from its `[[buffer(n)]]`, `[[threadgroup(n)]]` or position attribute);
//! - a `threadgroup` variable declared in a kernel becomes a reference to its threadgroup's
//!   copy: `threadgroup float x[N];` -> `auto &x = ::metal::emu::tg_local<float[N]>(...);`;
//! - Metal's vector constructors, `float2(x)`, become `metal_vector<float2>(x)`.
//!
//! Template kernels are found through their explicit instantiations' `host_name`s, read from
//! the preprocessed source (they are made by macros).
//!
//! The compiler: `$COMPANION_METAL_EMU_CXX`, else the first of `clang++`, `clang++-19` ...
//! `clang++-15` that has `_Float16` on this target (clang 15 and later on x86_64, any on
//! aarch64; Debian 12's default clang 14 has not: `apt-get install clang-16`).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn build() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let emu = dir.join("metal-emulator");
    for f in ["metal_stdlib", "runtime.cpp", "build.rs"] {
        println!("cargo:rerun-if-changed=metal-emulator/{f}");
    }
    println!("cargo:rerun-if-env-changed=COMPANION_METAL_EMU_CXX");
    let cxx = compiler(&out);
    let mut sources = Vec::new();
    let mut table = Vec::new();
    let mut shaders: Vec<PathBuf> = fs::read_dir(dir.join("metal"))
        .expect("engine/metal")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "metal"))
        .collect();
    // the emulator's own test kernels (a barrier under a condition, a race): never on a GPU
    shaders.extend(
        fs::read_dir(emu.join("tests"))
            .expect("engine/metal-emulator/tests")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "metal")),
    );
    shaders.sort();
    for (n, path) in shaders.iter().enumerate() {
        println!("cargo:rerun-if-changed={}", path.display());
        let text = fs::read_to_string(path).expect("a .metal source");
        let preprocessed = preprocess(&cxx, &out, path);
        let (code, entries) = translate(&text, &preprocessed, n, path);
        let file = out.join(format!(
            "{}.cpp",
            path.file_name().unwrap().to_string_lossy()
        ));
        fs::write(&file, code).expect("writing the translated kernels");
        sources.push(file);
        table.extend(entries);
    }
    let mut t = String::from("#include <metal_stdlib>\nnamespace metal { namespace emu {\n");
    for (name, wrapper) in &table {
        let _ = writeln!(t, "void {wrapper}(const Call &); // {name}");
    }
    t.push_str("const KernelEntry mtlemu_kernels[] = {\n");
    for (name, wrapper) in &table {
        let _ = writeln!(t, "    {{\"{name}\", &{wrapper}}},");
    }
    t.push_str("    {nullptr, nullptr}};\n}}\n");
    let table_file = out.join("mtlemu_table.cpp");
    fs::write(&table_file, t).expect("writing the kernel table");
    cc::Build::new()
        .cpp(true)
        .compiler(&cxx)
        .std("c++17")
        .opt_level(2)
        .include(&emu)
        .flag("-ffp-contract=off")
        .flag("-Wno-unused-parameter")
        .flag("-Wno-unused-variable")
        .flag("-Wno-unused-function")
        .flag("-Wno-unknown-attributes")
        .warnings(true)
        .files(&sources)
        .file(&table_file)
        .file(emu.join("runtime.cpp"))
        .compile("companion_metal_emulator");
}

/// A clang++ that has `_Float16`.
fn compiler(out: &Path) -> String {
    let probe = out.join("mtlemu_probe.cpp");
    fs::write(&probe, "_Float16 f(_Float16 a) { return a * a; }\n").expect("probe");
    let works = |c: &str| {
        Command::new(c)
            .args(["-std=c++17", "-fsyntax-only"])
            .arg(&probe)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if let Ok(c) = env::var("COMPANION_METAL_EMU_CXX") {
        assert!(
            works(&c),
            "$COMPANION_METAL_EMU_CXX ({c}) cannot compile _Float16"
        );
        return c;
    }
    let candidates = [
        "clang++",
        "clang++-19",
        "clang++-18",
        "clang++-17",
        "clang++-16",
        "clang++-15",
    ];
    candidates
        .iter()
        .find(|c| works(c))
        .map(|c| c.to_string())
        .unwrap_or_else(|| {
            panic!(
                "the metal-emulated feature needs a clang++ with _Float16 (clang 15 or later \
                 on x86_64; on Debian 12: apt-get install clang-16), or $COMPANION_METAL_EMU_CXX"
            )
        })
}

/// The source with its macros expanded (for the host names of template instantiations).
fn preprocess(cxx: &str, out: &Path, path: &Path) -> String {
    let empty = out.join("mtlemu_empty_include");
    fs::create_dir_all(&empty).expect("a folder");
    fs::write(empty.join("metal_stdlib"), "").expect("an empty header");
    let o = Command::new(cxx)
        .args(["-E", "-P", "-x", "c++", "-nostdinc", "-I"])
        .arg(&empty)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cxx}: {e}"));
    assert!(
        o.status.success(),
        "{cxx} -E {}: {}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// `text` with comments and string literals blanked (lengths and newlines kept).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                out[i] = b' ';
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            while i < b.len() && !b[i..].starts_with(b"*/") {
                if b[i] != b'\n' {
                    out[i] = b' ';
                }
                i += 1;
            }
            out[i..(i + 2).min(b.len())].fill(b' ');
            i += 2;
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("ASCII blanks keep UTF-8")
}

fn ident_at(s: &str, at: usize) -> &str {
    let end = s[at..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(s.len(), |e| at + e);
    &s[at..end]
}

fn skip_ws(s: &str, at: usize) -> usize {
    s[at..]
        .find(|c: char| !c.is_whitespace())
        .map_or(s.len(), |e| at + e)
}

/// The text from `open` (a bracket) to its match, exclusive, and the index after the match.
fn bracketed(s: &str, open: usize) -> (&str, usize) {
    let (o, c) = match s.as_bytes()[open] {
        b'(' => (b'(', b')'),
        b'<' => (b'<', b'>'),
        _ => (b'[', b']'),
    };
    let mut depth = 0;
    for (k, &ch) in s.as_bytes()[open..].iter().enumerate() {
        if ch == o {
            depth += 1;
        } else if ch == c {
            depth -= 1;
            if depth == 0 {
                return (&s[open + 1..open + k], open + k + 1);
            }
        }
    }
    panic!("unbalanced brackets in a kernel signature");
}

/// `kernel void NAME [<ARGS>] (PARAMS)` occurrences: (name, template args, params, what follows).
fn kernels(code: &str) -> Vec<(String, Option<String>, String, char, usize)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find("kernel") {
        let at = from + k;
        from = at + 6;
        let before_ok = at == 0 || !code.as_bytes()[at - 1].is_ascii_alphanumeric();
        if !before_ok || ident_at(code, at) != "kernel" {
            continue;
        }
        let v = skip_ws(code, at + 6);
        if ident_at(code, v) != "void" {
            continue;
        }
        let n = skip_ws(code, v + 4);
        let name = ident_at(code, n).to_string();
        let mut p = skip_ws(code, n + name.len());
        let mut targs = None;
        if code.as_bytes()[p] == b'<' {
            let (a, after) = bracketed(code, p);
            targs = Some(a.to_string());
            p = skip_ws(code, after);
        }
        if code.as_bytes()[p] != b'(' {
            continue;
        }
        let (params, after) = bracketed(code, p);
        let next = code.as_bytes()[skip_ws(code, after)] as char;
        found.push((name, targs, params.to_string(), next, at));
    }
    found
}

/// Split at top-level commas.
fn split_params(params: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in params.char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(params[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !params[start..].trim().is_empty() {
        out.push(params[start..].trim().to_string());
    }
    out
}

/// One parameter's argument expression in a kernel's wrapper.
fn argument(kernel: &str, param: &str) -> String {
    let open = param
        .find("[[")
        .unwrap_or_else(|| panic!("kernel {kernel}: parameter `{param}` has no attribute"));
    let close = param[open..].find("]]").expect("an attribute ends") + open;
    let attr = param[open + 2..close].trim();
    let decl = param[..open].trim();
    let name_at = decl
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let ty = decl[..name_at].trim();
    let index = |prefix: &str| -> Option<usize> {
        let rest = attr.strip_prefix(prefix)?.trim();
        let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
        inner.trim().parse().ok()
    };
    if let Some(i) = index("buffer") {
        if ty.ends_with('&') {
            format!("::metal::emu::buffer_reference<std::remove_reference_t<{ty}>>(c, {i})")
        } else {
            format!("::metal::emu::buffer_pointer<{ty}>(c, {i})")
        }
    } else if let Some(i) = index("threadgroup") {
        format!("::metal::emu::threadgroup_pointer<{ty}>(c, {i})")
    } else {
        format!("::metal::emu::value_of<{ty}>(c, ::metal::emu::Attr::{attr})")
    }
}

/// The C++ translation of one .metal source, and its kernels as (host name, wrapper).
fn translate(
    text: &str,
    preprocessed: &str,
    n: usize,
    path: &Path,
) -> (String, Vec<(String, String)>) {
    let code = strip(text);
    // definitions (with a body) from the source as written: their parameters
    let mut definitions = Vec::new();
    for (name, _, params, next, _) in kernels(&code) {
        if next == '{' {
            definitions.push((name, split_params(&params)));
        }
    }
    // the kernels to expose: non-template definitions by name, template ones by the host
    // names of their explicit instantiations
    let pcode = strip_keep_strings(preprocessed);
    let mut exposed: Vec<(String, String, Vec<String>)> = Vec::new();
    let template_names: Vec<String> = {
        let mut t = Vec::new();
        for (name, _, _, _, at) in kernels(&code) {
            let before = code[..at].trim_end();
            if before.ends_with('>') && definitions.iter().any(|d| d.0 == name) {
                t.push(name);
            }
        }
        t
    };
    for (name, params) in &definitions {
        if !template_names.contains(name) {
            exposed.push((name.clone(), name.clone(), params.clone()));
        }
    }
    for (name, targs, _, next, at) in kernels(&pcode) {
        let Some(targs) = targs else { continue };
        if next != ';' {
            continue;
        }
        let head = &preprocessed[..at];
        let host = head
            .rfind("host_name")
            .map(|h| {
                let (inside, _) = bracketed(preprocessed, h + "host_name".len());
                inside
                    .split('"')
                    .enumerate()
                    .filter(|(i, _)| i % 2 == 1)
                    .map(|(_, s)| s)
                    .collect::<String>()
            })
            .unwrap_or_else(|| format!("{name}<{targs}>"));
        let params = definitions
            .iter()
            .find(|d| d.0 == name)
            .map(|d| d.1.clone())
            .unwrap_or_else(|| panic!("{}: no definition of kernel {name}", path.display()));
        exposed.push((host, format!("{name}<{targs}>"), params));
    }

    let mut out = String::new();
    for line in text.lines() {
        out.push_str(&rewrite_line(line));
        out.push('\n');
    }
    let mut entries = Vec::new();
    out.push_str(
        "\n// ---- the emulator's wrappers: each kernel's parameters from its bindings ----\n",
    );
    for (k, (host, call, params)) in exposed.iter().enumerate() {
        let wrapper = format!("mtlemu_kernel_{n}_{k}");
        let args: Vec<String> = params.iter().map(|p| argument(host, p)).collect();
        let _ = writeln!(
            out,
            "namespace metal {{ namespace emu {{ void {wrapper}(const Call &c) {{ ::{call}({}); }} }} }}",
            args.join(", ")
        );
        entries.push((host.clone(), wrapper));
    }
    (out, entries)
}

/// As `strip`, for the preprocessed text: only comments (there are none after -E), strings
/// kept: the host names are in them.
fn strip_keep_strings(text: &str) -> String {
    text.to_string()
}

/// One line's rewrites (see the module's docs).
fn rewrite_line(line: &str) -> String {
    // a threadgroup variable declared in a kernel
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix("threadgroup ") {
        let body = rest.trim_end();
        if let Some(decl) = body.strip_suffix(';')
            && !decl.contains('*')
            && !decl.contains('=')
            && !decl.contains(',')
        {
            {
                let indent = &line[..line.len() - t.len()];
                let dims_at = decl.find('[').unwrap_or(decl.len());
                let (head, dims) = (decl[..dims_at].trim(), &decl[dims_at..]);
                let name_at = head
                    .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(0, |i| i + 1);
                let (ty, name) = (head[..name_at].trim(), &head[name_at..]);
                return format!(
                    "{indent}auto &{name} = ::metal::emu::tg_local<{ty}{dims}>(\"{ty} {name}{dims}\");"
                );
            }
        }
    }
    // attributes
    let mut s = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(a) = rest.find("[[") {
        s.push_str(&rest[..a]);
        match rest[a..].find("]]") {
            Some(e) => rest = &rest[a + e + 2..],
            None => {
                rest = &rest[a..];
                break;
            }
        }
    }
    s.push_str(rest);
    // vector constructors
    let mut out = String::with_capacity(s.len() + 16);
    let mut chars = s.char_indices().peekable();
    let mut previous: Option<char> = None;
    while let Some((i, ch)) = chars.next() {
        let boundary = !previous.is_some_and(|p| p.is_ascii_alphanumeric() || p == '_');
        if boundary && ch.is_ascii_alphabetic() {
            let id = ident_at(&s, i);
            let vector = [
                "char", "uchar", "short", "ushort", "int", "uint", "half", "float",
            ]
            .iter()
            .any(|base| {
                id.len() == base.len() + 1
                    && id.starts_with(base)
                    && matches!(id.as_bytes()[base.len()], b'2' | b'3' | b'4')
            });
            if vector && s.as_bytes().get(i + id.len()) == Some(&b'(') {
                out.push_str("metal_vector<");
                out.push_str(id);
                out.push('>');
            } else {
                out.push_str(id);
            }
            for _ in 1..id.len() {
                chars.next();
            }
            previous = id.chars().last();
        } else {
            out.push(ch);
            previous = Some(ch);
        }
    }
    out
}
