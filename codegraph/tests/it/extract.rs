//! tree-sitter extraction per language: definitions, nesting, docs, imports, calls.

use airlock_codegraph::Language;
use airlock_codegraph::extract::{Extractor, Symbols};

fn extract(language: Language, source: &str) -> Symbols {
    Extractor::new().unwrap().extract(language, source).unwrap()
}

fn names(symbols: &Symbols) -> Vec<(String, String, u32)> {
    symbols
        .defs
        .iter()
        .map(|d| (d.kind.clone(), d.name.clone(), d.depth))
        .collect()
}

fn owned(list: &[(&str, &str, u32)]) -> Vec<(String, String, u32)> {
    list.iter()
        .map(|(k, n, d)| (k.to_string(), n.to_string(), *d))
        .collect()
}

#[test]
fn python_classes_methods_docstrings_imports_calls() {
    let s = extract(
        Language::Python,
        "import os\nfrom a.b import c\n\nclass Reader(Base):\n    \"\"\"Reads things.\"\"\"\n    def read(self, n: int) -> bytes:\n        return os.read(n)\n\ndef helper():\n    Reader().read(3)\n",
    );
    assert_eq!(
        names(&s),
        owned(&[
            ("class", "Reader", 0),
            ("method", "read", 1),
            ("function", "helper", 0)
        ])
    );
    assert_eq!(s.defs[0].doc.as_deref(), Some("Reads things."));
    assert_eq!(s.defs[1].signature, "def read(self, n: int) -> bytes");
    assert_eq!(s.defs[1].line, 6);
    assert_eq!(s.imports, ["import os", "from a.b import c"]);
    assert!(s.calls.contains(&"read".to_string()) && s.calls.contains(&"Reader".to_string()));
    assert!(s.idents.contains_key("os"));
    assert!(s.structural_text().contains("Reads things."));
}

#[test]
fn rust_items() {
    let s = extract(
        Language::Rust,
        "use std::fmt;\n/// A point.\npub struct Point { x: i32 }\nimpl Point {\n    pub fn norm(&self) -> i32 { abs(self.x) }\n}\nfn main() { let p = Point { x: 1 }; p.norm(); }\n",
    );
    let defs = names(&s);
    assert!(
        defs.contains(&("class".into(), "Point".into(), 0)),
        "{defs:?}"
    );
    assert!(defs.iter().any(|(_, n, _)| n == "norm"), "{defs:?}");
    assert!(defs.iter().any(|(_, n, _)| n == "main"), "{defs:?}");
    assert_eq!(s.imports, ["use std::fmt;"]);
    let point = s.defs.iter().find(|d| d.name == "Point").unwrap();
    assert_eq!(point.doc.as_deref(), Some("A point."));
    assert!(s.calls.contains(&"abs".to_string()));
}

#[test]
fn javascript_and_typescript() {
    let js = extract(
        Language::Javascript,
        "import x from './x';\nclass Widget {\n  render() { return draw(); }\n}\nfunction mount(el) { new Widget().render(); }\n",
    );
    let defs = names(&js);
    assert!(
        defs.contains(&("class".into(), "Widget".into(), 0)),
        "{defs:?}"
    );
    assert!(
        defs.contains(&("method".into(), "render".into(), 1)),
        "{defs:?}"
    );
    assert!(
        defs.contains(&("function".into(), "mount".into(), 0)),
        "{defs:?}"
    );
    assert_eq!(js.imports, ["import x from './x';"]);

    let ts = extract(
        Language::Typescript,
        "interface Shape { area(): number }\nexport function total(shapes: Shape[]): number { return sum(shapes); }\n",
    );
    let defs = names(&ts);
    assert!(
        defs.iter()
            .any(|(k, n, _)| k == "interface" && n == "Shape"),
        "{defs:?}"
    );
    assert!(defs.iter().any(|(_, n, _)| n == "total"), "{defs:?}");
}

#[test]
fn go_and_java() {
    let go = extract(
        Language::Go,
        "package main\nimport \"fmt\"\n// Greet says hello.\nfunc Greet(name string) string { return fmt.Sprintf(\"hi %s\", name) }\ntype Server struct{}\nfunc (s *Server) Start() error { return nil }\n",
    );
    let defs = names(&go);
    assert!(
        defs.contains(&("function".into(), "Greet".into(), 0)),
        "{defs:?}"
    );
    assert!(
        defs.contains(&("method".into(), "Start".into(), 0)),
        "{defs:?}"
    );
    assert!(defs.iter().any(|(_, n, _)| n == "Server"), "{defs:?}");
    assert_eq!(go.imports, ["\"fmt\""]);
    assert_eq!(go.defs[0].doc.as_deref(), Some("Greet says hello."));
    assert!(go.calls.contains(&"Sprintf".to_string()));

    let java = extract(
        Language::Java,
        "package a.b;\nimport java.util.List;\npublic class Repo {\n  public List<String> names() { return load(); }\n}\n",
    );
    let defs = names(&java);
    assert!(
        defs.contains(&("class".into(), "Repo".into(), 0)),
        "{defs:?}"
    );
    assert!(
        defs.contains(&("method".into(), "names".into(), 1)),
        "{defs:?}"
    );
    assert!(java.imports.contains(&"import java.util.List;".to_string()));
}

#[test]
fn broken_source_still_yields_what_parses() {
    let s = extract(Language::Python, "def ok():\n    pass\n\ndef broken(:\n");
    assert!(s.defs.iter().any(|d| d.name == "ok"));
}

#[test]
fn every_language_loads_its_grammar_and_tags_query() {
    let mut extractor = Extractor::new().unwrap();
    for (language, source) in [
        (Language::Python, "def f():\n    pass\n"),
        (Language::Rust, "fn f() {}\n"),
        (Language::Javascript, "function f() {}\n"),
        (Language::Typescript, "function f(): void {}\n"),
        (Language::Tsx, "function f() { return <div/>; }\n"),
        (Language::Go, "package p\nfunc f() {}\n"),
        (Language::Java, "class A { void f() {} }\n"),
    ] {
        let symbols = extractor.extract(language, source).unwrap();
        assert!(
            symbols.defs.iter().any(|d| d.name == "f"),
            "{language:?}: {symbols:?}"
        );
    }
}

/// The doc of each definition named `name` (first one).
fn doc_of<'a>(symbols: &'a airlock_codegraph::extract::Symbols, name: &str) -> Option<&'a str> {
    symbols
        .defs
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no definition {name}: {:?}", symbols.defs))
        .doc
        .as_deref()
}

#[test]
fn leading_comments_reach_definitions_wrapped_in_a_statement_or_behind_attributes() {
    let js = extract(
        Language::Javascript,
        "/**\n * Create a router.\n */\nvar proto = module.exports = function(options) {\n  return 1;\n};\n\n\
         /**\n * Dispatch a request into the router.\n */\nproto.handle = function handle(req, res, out) {\n  next();\n};\n\n\
         /**\n * Route a path.\n * @public\n */\n\nproto.route = function route(path) {\n  return path;\n};\n\n\
         // Unrelated note.\n\nproto.use = function use(fn) {\n  return fn;\n};\n",
    );
    assert_eq!(
        doc_of(&js, "handle"),
        Some("Dispatch a request into the router.")
    );
    assert_eq!(
        doc_of(&js, "route"),
        Some("Route a path. @public"),
        "a /** block one blank line above is the doc"
    );
    assert_eq!(
        doc_of(&js, "use"),
        None,
        "a // comment a blank line above is not the doc"
    );

    let ts = extract(
        Language::Typescript,
        "/** Parse the input strictly. */\nexport function parseStrict(input: string): number {\n  return 1;\n}\n\
         // Cache of compiled schemas.\nexport const compile = (s: string): string => s;\n\
         /** A schema. */\nexport class Schema {\n  /** Check one value. */\n  check(v: unknown): boolean { return true; }\n  plain(): void {}\n}\n",
    );
    assert_eq!(
        doc_of(&ts, "parseStrict"),
        Some("Parse the input strictly.")
    );
    assert_eq!(doc_of(&ts, "compile"), Some("Cache of compiled schemas."));
    assert_eq!(doc_of(&ts, "Schema"), Some("A schema."));
    assert_eq!(doc_of(&ts, "check"), Some("Check one value."));
    assert_eq!(
        doc_of(&ts, "plain"),
        None,
        "the class's doc is not its methods'"
    );

    let rust = extract(
        Language::Rust,
        "/// Options of a search.\n#[derive(Debug, Clone)]\n#[non_exhaustive]\npub struct Options {\n    pub x: u32,\n}\n\n\
         /// Run the search.\n#[inline]\npub fn run() {}\n\n#[test]\nfn bare() {}\n",
    );
    assert_eq!(doc_of(&rust, "Options"), Some("Options of a search."));
    assert_eq!(doc_of(&rust, "run"), Some("Run the search."));
    assert_eq!(doc_of(&rust, "bare"), None);

    let go = extract(
        Language::Go,
        "package p\n\n// Server serves files.\ntype Server struct{}\n",
    );
    assert_eq!(doc_of(&go, "Server"), Some("Server serves files."));

    let java = extract(
        Language::Java,
        "package a;\n/** Reads rows. */\n@Deprecated\npublic class Reader {\n  /** Next row. */\n  @Override\n  public String next() { return null; }\n}\n",
    );
    assert_eq!(doc_of(&java, "Reader"), Some("Reads rows."));
    assert_eq!(doc_of(&java, "next"), Some("Next row."));
}
