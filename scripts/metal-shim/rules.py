#!/usr/bin/env python3
"""Metal's own rules, beyond what a C++ front end checks, for scripts/check-metal.

  rules.py source FILE.metal           on the source as written:
      - no `double` (Metal has no 64-bit floating point type);
      - `[[buffer(n)]]` (and `[[threadgroup(n)]]`) indices unique within each kernel's
        parameters, and below Metal's 31 buffer slots.
  rules.py ast FILE.metal < DUMP       on clang's `-ast-dump` of the rewritten source:
      - a variable at file (or namespace) scope, or a `static` one in a function, only in the
        `constant` address space (the rewrite's own `static threadgroup` kernel variables
        aside).
  rules.py threadgroup FILE.metal < NM on `nm --format=sysv -S -C` of the rewritten source
      compiled to an object: the threadgroup variables of each kernel instantiation (the
      rewrite makes them function statics in a section of their own, so clang lays each out
      and names it `kernel<args>(...)::name`), summed
      per instantiation, at most 32 KiB (Apple GPUs' `maxThreadgroupMemoryLength`); and none
      declared outside a kernel.

Every finding is printed as `FILE:LINE: error: ...` (threadgroup sizes name the kernel
instantiation instead of a line); the exit status is 1 when there is one.
"""
import re
import sys

THREADGROUP_LIMIT = 32 * 1024
BUFFER_SLOTS = 31


def strip_comments_and_strings(text):
    """The source with comments and string/char literals blanked, newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def kernels(code):
    """(name, offset of the name, parameter text, offset of the parameter text) of each
    `kernel` function definition or explicit instantiation."""
    for m in re.finditer(r"\bkernel\s+void\s+(\w+)\s*(<[^>(]*>)?\s*\(", code):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[j], 0)
            j += 1
        yield m.group(1), m.start(1), code[m.end() : j - 1], m.end()


def check_source(path):
    text = open(path, encoding="utf-8").read()
    code = strip_comments_and_strings(text)
    errors = []
    for m in re.finditer(r"\bdouble\b", code):
        errors.append(
            f"{path}:{line_of(code, m.start())}: error: `double`: Metal has no 64-bit "
            "floating point type (use float)"
        )
    for name, _, params, at in kernels(code):
        for space in ("buffer", "threadgroup"):
            seen = {}
            for m in re.finditer(r"\[\[\s*" + space + r"\s*\(\s*(\d+)\s*\)\s*\]\]", params):
                index, line = int(m.group(1)), line_of(code, at + m.start())
                if index in seen:
                    errors.append(
                        f"{path}:{line}: error: kernel `{name}`: [[{space}({index})]] is "
                        f"also the index of another parameter (line {seen[index]}); each "
                        "argument needs its own index"
                    )
                else:
                    seen[index] = line
                if space == "buffer" and index >= BUFFER_SLOTS:
                    errors.append(
                        f"{path}:{line}: error: kernel `{name}`: [[buffer({index})]]: Metal "
                        f"has {BUFFER_SLOTS} buffer slots (0 to {BUFFER_SLOTS - 1})"
                    )
    return errors


def check_ast(path, dump):
    """Variables at file or namespace scope, and static ones anywhere, must be `constant`
    (address space 2 in the shim). Locations in a text AST dump are relative to the last
    one printed, so the current file and line are tracked over the whole dump."""
    errors = []
    file, line = None, 0
    stack = []  # kinds of the open ancestors, by depth
    located = re.compile(r"(<stdin>|/[^:<>,\s]+):(\d+):\d+|\bline:(\d+):\d+")
    for raw in dump.splitlines():
        m = re.match(r"^([| `]*)[|`]-(\w+)", raw)
        if m:
            depth = len(m.group(1)) // 2 + 1
            kind = m.group(2)
        elif raw.startswith("TranslationUnitDecl"):
            depth, kind = 0, "TranslationUnitDecl"
        else:
            continue
        del stack[depth:]
        stack.append(kind)
        begin = None
        for loc in located.finditer(raw):
            if loc.group(1):
                file, line = loc.group(1), int(loc.group(2))
            else:
                line = int(loc.group(3))
            if begin is None:
                begin = line
        if kind != "VarDecl" or file != "<stdin>":
            continue
        begin = begin or line
        parents = stack[:-1]
        at_file_scope = all(
            p in ("TranslationUnitDecl", "NamespaceDecl", "LinkageSpecDecl") for p in parents
        )
        types = re.findall(r"'([^']*)'", raw)
        ty = types[0] if types else ""
        is_static = re.search(r"' static\b|'\s+static\b| static$", raw) is not None
        name = re.search(r"\b(?:used |referenced )?(\w+) '", raw)
        name = name.group(1) if name else "?"
        # clang prints an address space as the shim spells it (the macro) or as the attribute
        constant = re.search(r"\bconstant\b|address_space\(2\)", ty) is not None
        threadgroup = re.search(r"\bthreadgroup\b|address_space\(3\)", ty) is not None
        rewritten_threadgroup = threadgroup and not at_file_scope
        if (at_file_scope or is_static) and not constant and not rewritten_threadgroup:
            where = "at file scope" if at_file_scope else "static in a function"
            message = (
                f"{path}:{begin}: error: `{name}` ({ty}) is a variable {where} outside the "
                "`constant` address space; Metal allows only `constant` program-scope "
                "variables"
            )
            if message not in errors:  # once, not per template instantiation
                errors.append(message)
    return errors


def check_threadgroup(path, nm, kernel_names):
    sizes = {}
    order = []
    for raw in nm.splitlines():
        # `nm --format=sysv -S -C`: name|value|class|type|size|line|section
        fields = [f.strip() for f in raw.split("|")]
        if len(fields) < 7 or fields[6] != ".metal_threadgroup" or fields[3] != "OBJECT":
            continue
        symbol = fields[0]
        # `function(params)::variable`: the variable follows the last `)::`
        cut = symbol.rfind(")::")
        if cut < 0:
            continue
        function, variable = symbol[: cut + 1], symbol[cut + 3 :]
        size = int(fields[4], 16)
        key = function
        if key not in sizes:
            sizes[key] = []
            order.append(key)
        sizes[key].append((variable, size))
    errors = []
    for function in order:
        base = re.match(r"(\w+)", function).group(1)
        short = re.match(r"[^(]*", function).group(0)
        total = sum(s for _, s in sizes[function])
        if base not in kernel_names:
            errors.append(
                f"{path}: error: `{short}` declares threadgroup variables "
                f"({', '.join(v for v, _ in sizes[function])}); Metal allows them only in a "
                "kernel function"
            )
        elif total > THREADGROUP_LIMIT:
            detail = ", ".join(f"{v} {s}" for v, s in sizes[function])
            errors.append(
                f"{path}: error: kernel `{short}` declares {total} bytes of threadgroup memory "
                f"({detail}); Apple GPUs allow {THREADGROUP_LIMIT}"
            )
    return errors, {re.match(r"[^(]*", f).group(0): sum(s for _, s in sizes[f]) for f in order}


def main():
    what, path = sys.argv[1], sys.argv[2]
    if what == "source":
        errors = check_source(path)
    elif what == "ast":
        errors = check_ast(path, sys.stdin.read())
    elif what == "threadgroup":
        code = strip_comments_and_strings(open(path, encoding="utf-8").read())
        names = {name for name, _, _, _ in kernels(code)}
        errors, totals = check_threadgroup(path, sys.stdin.read(), names)
        if not errors and totals:
            most = max(totals, key=totals.get)
            print(
                f"check-metal: {path}: threadgroup memory per kernel instantiation at most "
                f"{totals[most]} bytes ({most}), limit {THREADGROUP_LIMIT}"
            )
    else:
        sys.exit(f"rules.py: unknown check {what}")
    for e in errors:
        print(e, file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
