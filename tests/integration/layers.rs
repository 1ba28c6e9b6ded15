//! The library's folders are its layers; a layer may import only the layers before it in
//! `LAYERS`, so the order stated in `shared/src/lib.rs` and the README stays true.

use std::path::Path;

const LAYERS: [&str; 6] = ["runtime", "domain", "redis", "archive", "services", "http"];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `crate::<layer>` a source file names, including those inside `use crate::{a, b}`.
fn layers_named(source: &str) -> Vec<&'static str> {
    let mut named = Vec::new();
    for (at, _) in source.match_indices("crate::") {
        let rest = &source[at + "crate::".len()..];
        let scope = match rest.strip_prefix('{') {
            Some(group) => &group[..group.find('}').unwrap_or(group.len())],
            None => &rest[..rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len())],
        };
        for layer in LAYERS {
            let hit = scope.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|word| word == layer);
            if hit && !named.contains(&layer) {
                named.push(layer);
            }
        }
    }
    named
}

#[test]
fn each_layer_imports_only_the_layers_before_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/src");
    let mut violations = Vec::new();
    for (rank, layer) in LAYERS.iter().enumerate() {
        let mut files = Vec::new();
        sources(&root.join(layer), &mut files);
        assert!(!files.is_empty(), "no sources under shared/src/{layer}");
        for file in files {
            let source = std::fs::read_to_string(&file).unwrap();
            for named in layers_named(&source) {
                let named_rank = LAYERS.iter().position(|l| *l == named).unwrap();
                if named_rank > rank {
                    violations.push(format!("{} imports crate::{named}", file.strip_prefix(&root).unwrap().display()));
                }
            }
        }
    }
    assert!(violations.is_empty(), "layer order broken:\n{}", violations.join("\n"));
}

#[test]
fn the_check_sees_grouped_and_plain_imports() {
    assert_eq!(layers_named("use crate::http::ApiError;"), vec!["http"]);
    assert_eq!(layers_named("use crate::{domain::ids, services::reads};"), vec!["domain", "services"]);
    assert_eq!(layers_named("let x = crate::system_clock();"), Vec::<&str>::new());
}
