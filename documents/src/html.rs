//! HTML to text, bounded. The page is parsed by html5ever (the WHATWG algorithm browsers follow)
//! into html2text's DOM and rendered by html2text, which drops scripts and styles and decodes
//! entities. A hostile page can make either step take time or memory far beyond its size:
//! html5ever scans its stack of open elements on every tag, so thousands of nested elements
//! cost quadratic time (100,000 nested `<div>`s, 1 MB, took 36 s; nested lists far longer),
//! each element costs its node, and html2text's rendering slows with depth. So the parse runs
//! through a sink that counts the tree builder's work (the element names it looks at, which is
//! what its scans are made of) and the nodes made, with budgets proportional to the page, and
//! the tree's depth is checked before rendering, against the 512 levels Chromium's parser
//! allows (`kMaximumHTMLParserDOMTreeDepth`). A page past a budget is refused with
//! [`Error::TooComplex`], deterministically: the same page always gets the same answer.

use std::borrow::Cow;
use std::cell::Cell;
use std::path::Path;
use std::sync::LazyLock;

use html2text::{Handle, RcDom};
use html5ever::interface::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::{Attribute, ExpandedName, LocalName, Namespace, QualName};

use crate::error::{Error, Result};

/// Wide enough that html2text never wraps a paragraph: line breaks inside a paragraph would
/// only cost tokens.
const HTML_WIDTH: usize = 1 << 16;
/// Deepest element nesting read (Chromium's parser stops nesting at 512).
pub const MAX_DEPTH: usize = 512;
/// Element names the tree builder may look at, per byte of the page (plus a floor): an
/// ordinary page needs a few per byte, nested tags thousands.
const WORK_PER_BYTE: u64 = 64;
const WORK_FLOOR: u64 = 1 << 20;
/// Nodes made, at most (about 1 KB each once rendered): a 64 MB page of prose has far fewer.
pub const MAX_NODES: u64 = 2_000_000;
/// Bytes fed to the parser at a time; budgets are checked between pieces.
const PIECE: usize = 16 * 1024;

static HTML_NS: LazyLock<Namespace> = LazyLock::new(|| html5ever::ns!(html));
static HTML_LOCAL: LazyLock<LocalName> = LazyLock::new(|| html5ever::local_name!("html"));

/// The text of the HTML page `html` (read from `path`, which names it in errors).
pub(crate) fn html_text(path: &Path, html: &str) -> Result<String> {
    let too_complex = |reason: String| Error::TooComplex {
        path: path.to_path_buf(),
        format: "html",
        reason,
    };
    let sink = BoundedSink {
        inner: RcDom::default(),
        work: Cell::new(0),
        work_budget: WORK_FLOOR + WORK_PER_BYTE * html.len() as u64,
        nodes: Cell::new(0),
        over: Cell::new(None),
    };
    let opts = html5ever::ParseOpts {
        tree_builder: html5ever::tree_builder::TreeBuilderOpts {
            scripting_enabled: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut parser = html5ever::parse_document(sink, opts);
    let mut rest = html;
    while !rest.is_empty() {
        let mut cut = rest.len().min(PIECE);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        parser.process(StrTendril::from_slice(piece));
        if let Some(reason) = parser.tokenizer.sink.sink.over.get() {
            return Err(too_complex(reason.sentence()));
        }
        rest = tail;
    }
    let sink = parser.finish();
    if let Some(reason) = sink.over.get() {
        return Err(too_complex(reason.sentence()));
    }
    let dom = sink.inner;
    let depth = depth(&dom.document);
    if depth > MAX_DEPTH {
        return Err(too_complex(format!(
            "its elements nest {depth} deep; Companion reads up to {MAX_DEPTH}"
        )));
    }
    let config = html2text::config::plain_no_decorate().allow_width_overflow();
    // html2text fails only on a broken reader or an impossible width, neither possible here
    Ok(config
        .dom_to_render_tree(&dom)
        .and_then(|tree| config.render_to_string(tree, HTML_WIDTH))
        .unwrap_or_default())
}

/// The deepest nesting under `root`, counted without recursion.
fn depth(root: &Handle) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root.clone(), 0usize)];
    while let Some((node, d)) = stack.pop() {
        deepest = deepest.max(d);
        for child in node.children.borrow().iter() {
            stack.push((child.clone(), d + 1));
        }
    }
    deepest
}

#[derive(Debug, Clone, Copy)]
enum Over {
    Work,
    Nodes,
}

impl Over {
    fn sentence(self) -> String {
        match self {
            Over::Work => "its markup nests too deeply to parse in reasonable time".into(),
            Over::Nodes => format!("it has more than {MAX_NODES} elements"),
        }
    }
}

/// html2text's DOM, with the budgets counted (see the module docs). Once a budget is spent,
/// every element answers to the name `html`, where every scan of the tree builder stops, so
/// the rest of the piece being parsed costs little; the page is then refused.
struct BoundedSink {
    inner: RcDom,
    work: Cell<u64>,
    work_budget: u64,
    nodes: Cell<u64>,
    over: Cell<Option<Over>>,
}

impl BoundedSink {
    fn node_made(&self) {
        self.nodes.set(self.nodes.get() + 1);
        if self.nodes.get() > MAX_NODES && self.over.get().is_none() {
            self.over.set(Some(Over::Nodes));
        }
    }
}

impl TreeSink for BoundedSink {
    type Handle = Handle;
    type Output = Self;
    type ElemName<'a> = ExpandedName<'a>;

    fn finish(self) -> Self {
        self
    }

    fn parse_error(&self, _msg: Cow<'static, str>) {
        // html2text keeps every parse error; a hostile page has millions, none of use here
    }

    fn get_document(&self) -> Handle {
        self.inner.get_document()
    }

    fn elem_name<'a>(&'a self, target: &'a Handle) -> ExpandedName<'a> {
        if self.over.get().is_some() {
            return ExpandedName {
                ns: &HTML_NS,
                local: &HTML_LOCAL,
            };
        }
        self.work.set(self.work.get() + 1);
        if self.work.get() > self.work_budget {
            self.over.set(Some(Over::Work));
        }
        self.inner.elem_name(target)
    }

    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> Handle {
        self.node_made();
        self.inner.create_element(name, attrs, flags)
    }

    fn create_comment(&self, text: StrTendril) -> Handle {
        self.node_made();
        self.inner.create_comment(text)
    }

    fn create_pi(&self, target: StrTendril, data: StrTendril) -> Handle {
        self.node_made();
        self.inner.create_pi(target, data)
    }

    fn append(&self, parent: &Handle, child: NodeOrText<Handle>) {
        if matches!(child, NodeOrText::AppendText(_)) {
            self.node_made();
        }
        self.inner.append(parent, child)
    }

    fn append_based_on_parent_node(
        &self,
        element: &Handle,
        prev: &Handle,
        child: NodeOrText<Handle>,
    ) {
        self.inner.append_based_on_parent_node(element, prev, child)
    }

    fn append_doctype_to_document(
        &self,
        name: StrTendril,
        public_id: StrTendril,
        system_id: StrTendril,
    ) {
        self.inner
            .append_doctype_to_document(name, public_id, system_id)
    }

    fn get_template_contents(&self, target: &Handle) -> Handle {
        self.inner.get_template_contents(target)
    }

    fn same_node(&self, x: &Handle, y: &Handle) -> bool {
        self.inner.same_node(x, y)
    }

    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.inner.set_quirks_mode(mode)
    }

    fn append_before_sibling(&self, sibling: &Handle, child: NodeOrText<Handle>) {
        self.inner.append_before_sibling(sibling, child)
    }

    fn add_attrs_if_missing(&self, target: &Handle, attrs: Vec<Attribute>) {
        self.inner.add_attrs_if_missing(target, attrs)
    }

    fn remove_from_parent(&self, target: &Handle) {
        self.inner.remove_from_parent(target)
    }

    fn reparent_children(&self, node: &Handle, new_parent: &Handle) {
        self.inner.reparent_children(node, new_parent)
    }

    fn is_mathml_annotation_xml_integration_point(&self, handle: &Handle) -> bool {
        self.inner
            .is_mathml_annotation_xml_integration_point(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_pages_are_read_within_the_budgets() {
        let page = "<!doctype html><title>t</title><style>p{}</style><ul><li>one<li>two</ul>\
                    <table><tr><td>cell</td></tr></table><p>Caf&eacute; <b>bold</b>";
        let text = html_text(Path::new("x.html"), page).unwrap();
        for word in ["one", "two", "cell", "Café", "bold"] {
            assert!(text.contains(word), "{word} in {text:?}");
        }
        assert!(!text.contains("p{}"));
        let nested = "<div>".repeat(MAX_DEPTH - 10) + "deep";
        assert!(
            html_text(Path::new("x.html"), &nested)
                .unwrap()
                .contains("deep")
        );
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        let nested = "<div>".repeat(MAX_DEPTH + 10) + "deep";
        let err = html_text(Path::new("x.html"), &nested).unwrap_err();
        assert_eq!(err.code(), "document_too_complex", "{err}");
    }
}
