//! The README's Rust example ("Using Homa from an application") is the
//! crate documentation's example, which runs as a doc test: this test keeps
//! the two identical, so the README shows code that compiles and runs.

use std::path::{Path, PathBuf};

/// The README: the repository's, or (in the packaged crate, where `readme`
/// puts it) the crate's own copy.
fn readme() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    [dir.join("../../README.md"), dir.join("README.md")]
        .into_iter()
        .find(|p| p.exists())
        .expect("README.md not found beside the crate or at the repository root")
}

/// The lines of the first ```rust block after the heading `heading`.
fn readme_example(text: &str, heading: &str) -> Vec<String> {
    let start = text
        .lines()
        .position(|l| l.trim() == heading)
        .unwrap_or_else(|| panic!("README has no heading {heading:?}"));
    let lines: Vec<&str> = text.lines().skip(start + 1).collect();
    let open = lines
        .iter()
        .position(|l| l.trim() == "```rust")
        .expect("no ```rust block after the heading");
    let body = &lines[open + 1..];
    let close = body
        .iter()
        .position(|l| l.trim() == "```")
        .expect("unterminated block");
    body[..close].iter().map(|l| l.to_string()).collect()
}

/// The lines of the first code block after `//! # Example` in the crate
/// docs, without the `//!` prefix and without rustdoc's hidden (`# `)
/// lines.
fn doc_example(lib_rs: &str) -> Vec<String> {
    let docs: Vec<&str> = lib_rs
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.trim_start_matches("//!"))
        })
        .collect();
    let start = docs
        .iter()
        .position(|l| *l == "# Example")
        .expect("the crate docs have no `# Example` section");
    let rest = &docs[start + 1..];
    let open = rest
        .iter()
        .position(|l| l.starts_with("```"))
        .expect("no code block in `# Example`");
    let body = &rest[open + 1..];
    let close = body
        .iter()
        .position(|l| *l == "```")
        .expect("unterminated block");
    body[..close]
        .iter()
        .filter(|l| !(l.starts_with("# ") || **l == "#"))
        .map(|l| l.to_string())
        .collect()
}

#[test]
fn readme_example_is_the_doc_tested_example() {
    let readme = std::fs::read_to_string(readme()).unwrap();
    let lib_rs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
    let shown = readme_example(&readme, "## Using Homa from an application");
    let tested = doc_example(&lib_rs);
    assert!(tested.len() > 10, "doc example too short: {tested:?}");
    if shown != tested {
        let first = shown
            .iter()
            .zip(&tested)
            .position(|(a, b)| a != b)
            .unwrap_or(shown.len().min(tested.len()));
        panic!(
            "the README's example differs from the one in crates/homa/src/lib.rs \
             (doc-tested) at line {}:\n  README: {:?}\n  lib.rs: {:?}\n\
             Copy the lib.rs example (without its `# ` lines) into the README.",
            first + 1,
            shown.get(first),
            tested.get(first)
        );
    }
}

#[test]
fn the_extraction_sees_differences() {
    let lib_rs = "//! x\n//!\n//! # Example\n//!\n//! ```\n//! # fn main() {\n//! let a = 1;\n//! # }\n//! ```\n";
    let readme = "# T\n## Using\n\ntext\n```rust\nlet a = 1;\n```\n";
    assert_eq!(doc_example(lib_rs), vec!["let a = 1;"]);
    assert_eq!(readme_example(readme, "## Using"), vec!["let a = 1;"]);
    let other = readme.replace("a = 1", "a = 2");
    assert_ne!(doc_example(lib_rs), readme_example(&other, "## Using"));
}
