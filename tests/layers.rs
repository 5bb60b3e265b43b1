//! Strict layering: every `crate::` path in `src/` names a module on a lower layer than the
//! module it is written in, with the layers read from ARCHITECTURE.md, so the document stays
//! the truth about the code and a back edge fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const START: &str = "<!-- layers:start -->";
const END: &str = "<!-- layers:end -->";

/// Module -> layer number, from the numbered list between the markers in ARCHITECTURE.md:
/// one line per layer, leaf first, each naming its modules in backticks.
fn layers(architecture: &str) -> BTreeMap<String, usize> {
    let start = architecture.find(START).expect("ARCHITECTURE.md marks its layer list") + START.len();
    let end = architecture[start..].find(END).expect("the layer list ends") + start;
    let mut layers = BTreeMap::new();
    let lines = architecture[start..end].lines().filter(|line| !line.trim().is_empty());
    for (layer, line) in lines.enumerate() {
        let names: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
        assert!(!names.is_empty(), "layer line without a `module`: {line:?}");
        for name in names {
            assert!(layers.insert(name.to_string(), layer).is_none(), "`{name}` is listed twice");
        }
    }
    layers
}

/// The top-level module each `.rs` file of `src/` belongs to (`src/kb/vector.rs` -> `kb`);
/// `lib.rs`, which only declares the modules, belongs to none.
fn files(src: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(src).expect("under src");
                let first = relative.components().next().expect("a component").as_os_str().to_string_lossy();
                let module = first.trim_end_matches(".rs").to_string();
                if module != "lib" {
                    out.push((module, path));
                }
            }
        }
    }
    out.sort();
    out
}

/// The top-level modules `source` names through `crate::` (`use crate::kb::Kb`,
/// `crate::text::normalize(..)`, `use crate::{config, error}`), comments left out.
fn crate_paths(source: &str) -> BTreeSet<String> {
    let code: String = source.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let ident = |s: &str| s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.insert(ident(&item));
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|name| !name.is_empty() && name != "self");
    out
}

#[test]
fn no_module_imports_one_above_it_in_architecture_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let layers = layers(&architecture);
    let files = files(&root.join("src"));

    let modules: BTreeSet<&String> = files.iter().map(|(module, _)| module).collect();
    let listed: BTreeSet<&String> = layers.keys().collect();
    assert_eq!(modules, listed, "ARCHITECTURE.md's layers must list exactly the modules of src/");

    let mut back_edges = Vec::new();
    for (module, path) in &files {
        let source = std::fs::read_to_string(path).expect("read source");
        // A path that climbs out of its module with `super::super` escapes the check below.
        if source.contains("super::super::") {
            back_edges.push(format!("{} climbs with `super::super::`: write a `crate::` path", path.display()));
        }
        for used in crate_paths(&source) {
            // `crate::Result` and the like are the crate root's re-exports of `error`.
            let used = if layers.contains_key(&used) { used } else { "error".to_string() };
            if used != *module && layers[&used] >= layers[module] {
                back_edges.push(format!(
                    "{} (layer {}) uses `{used}` (layer {})",
                    path.strip_prefix(root).unwrap_or(path).display(),
                    layers[module] + 1,
                    layers[&used] + 1
                ));
            }
        }
    }
    assert!(back_edges.is_empty(), "imports that are not strictly downward:\n{}", back_edges.join("\n"));
}

#[test]
fn crate_paths_are_found_in_every_spelling() {
    let source = "use crate::kb::Kb;\nuse crate::{config::Settings, error::{Error, Result}};\n\
                  let x = crate::text::normalize(a); // crate::engine in a comment\n\
                  /// [`crate::rpc`] in a doc comment\nfn f() -> crate::Result<()> {}";
    let found: Vec<String> = crate_paths(source).into_iter().collect();
    assert_eq!(found, ["Result", "config", "error", "kb", "text"]);
}

#[test]
fn layer_lines_are_read_in_order() {
    let doc = format!("intro `x`\n{START}\n1. `error`\n2. `text`, `rank`\n\n3. `config`\n{END}\n`after`");
    let layers = layers(&doc);
    assert_eq!(layers.len(), 4);
    assert_eq!((layers["error"], layers["text"], layers["rank"], layers["config"]), (0, 1, 1, 2));
}
