//! Strict layering: every `crate::` path in `src/` names a module on a lower layer than the
//! module it is written in, with the layers read from ARCHITECTURE.md, so the document stays
//! the truth about the code and a back edge fails here; and inside a module no two files
//! reach each other, directly or around a cycle.

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
    paths_after(source, "crate::")
        .into_iter()
        .filter_map(|path| path.into_iter().next())
        .filter(|name| !name.is_empty() && name != "self")
        .collect()
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

/// Every path `source` names after `prefix` (`super::`, `self::`, `crate::`), as its
/// segments, with groups expanded (`super::{a, b::{c, d}}` gives `[a]`, `[b, c]`, `[b, d]`),
/// comments left out.
fn paths_after(source: &str, prefix: &str) -> Vec<Vec<String>> {
    let code: String = source.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut out = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '$') {
            continue;
        }
        let mut rest: Vec<char> = code[at + prefix.len()..].chars().collect();
        rest.truncate(rest.iter().position(|c| *c == ';').unwrap_or(rest.len()));
        parse_path(&rest, &mut 0, Vec::new(), &mut out);
    }
    out
}

/// Reads one path (or a `{...}` group of paths) at `chars[*at..]` after the segments
/// `stem`, pushing each complete path to `out`.
fn parse_path(chars: &[char], at: &mut usize, stem: Vec<String>, out: &mut Vec<Vec<String>>) {
    let skip_space = |at: &mut usize| {
        while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
            *at += 1;
        }
    };
    skip_space(at);
    if chars.get(*at) == Some(&'{') {
        *at += 1;
        loop {
            parse_path(chars, at, stem.clone(), out);
            skip_space(at);
            match chars.get(*at) {
                Some(',') => *at += 1,
                Some('}') => {
                    *at += 1;
                    return;
                }
                _ => return,
            }
        }
    }
    let start = *at;
    while chars.get(*at).is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == '*') {
        *at += 1;
    }
    let mut path = stem;
    path.push(chars[start..*at].iter().collect());
    if chars.get(*at) == Some(&':') && chars.get(*at + 1) == Some(&':') {
        *at += 2;
        parse_path(chars, at, path, out);
    } else {
        out.push(path);
    }
}

/// The rust files under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Cycles between the files of one module directory of `src`: each child file (a
/// subdirectory counting as one, with everything in it) is a node, and reads another when
/// one of its files names it through `super::` (from the child's own top file, tests aside)
/// or `crate::` (from anywhere in it). The directory's `mod.rs` is the module's front: it
/// declares and re-exports the files and may hold the types they share, so it is no node.
fn intra_module_cycles(src: &Path) -> Vec<String> {
    let mut cycles = Vec::new();
    let mut dirs: Vec<PathBuf> = rust_files(src).iter().filter_map(|f| f.parent().map(Path::to_path_buf)).collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs.iter().filter(|d| d.as_path() != src) {
        let module: Vec<String> = dir
            .strip_prefix(src)
            .expect("under src")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect();
        let children: BTreeSet<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .filter_map(|e| {
                let path = e.ok()?.path();
                let name = path.file_stem()?.to_string_lossy().to_string();
                (path.is_dir() || (path.extension().is_some_and(|x| x == "rs") && name != "mod")).then_some(name)
            })
            .collect();
        let node = |segment: &str| children.contains(segment).then(|| segment.to_string());
        let mut reads: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for child in &children {
            let top = [dir.join(format!("{child}.rs")), dir.join(child).join("mod.rs")];
            let files: Vec<PathBuf> = if dir.join(child).is_dir() {
                rust_files(&dir.join(child))
            } else {
                vec![dir.join(format!("{child}.rs"))]
            };
            for file in files {
                let source = std::fs::read_to_string(&file).expect("read source");
                let mut targets: Vec<String> = Vec::new();
                if top.contains(&file) {
                    // Inside an inline module (the tests at a file's end) `super` is the file.
                    let outer = source.find("mod tests {").map_or(source.as_str(), |end| &source[..end]);
                    targets.extend(paths_after(outer, "super::").iter().filter_map(|p| node(&p[0])));
                }
                for path in paths_after(&source, "crate::") {
                    if path.len() > module.len() && path[..module.len()] == module[..] {
                        targets.extend(node(&path[module.len()]));
                    }
                }
                reads.entry(child.clone()).or_default().extend(targets.into_iter().filter(|t| t != child));
            }
        }
        cycles.extend(find_cycles(&reads).into_iter().map(|c| format!("{}: {}", dir.display(), c.join(" -> "))));
    }
    cycles
}

/// The cycles of a directed graph, each once, as the nodes around it.
fn find_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        out: &mut Vec<Vec<String>>,
    ) {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(node.to_string());
            out.push(cycle);
            return;
        }
        if !done.insert(node.to_string()) {
            return;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, stack, done, out);
        }
        stack.pop();
    }
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, graph, &mut Vec::new(), &mut done, &mut out);
    }
    out
}

#[test]
fn no_two_files_of_a_module_read_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let cycles = intra_module_cycles(&src);
    assert!(cycles.is_empty(), "files of one module that read each other, in a cycle:\n{}", cycles.join("\n"));
}

#[test]
fn a_planted_cycle_between_two_files_is_found() {
    let root = std::env::temp_dir().join(format!("a2rag-layers-{}", std::process::id()));
    let module = root.join("src").join("shop");
    std::fs::create_dir_all(module.join("till")).expect("make the planted module");
    let write = |path: PathBuf, text: &str| std::fs::write(path, text).expect("write a planted file");
    write(root.join("src").join("lib.rs"), "pub mod shop;\n");
    write(module.join("mod.rs"), "mod price;\nmod stock;\nmod till;\npub struct Shop;\n");
    write(module.join("price.rs"), "use super::stock::Level;\npub struct Price;\n");
    write(module.join("stock.rs"), "pub struct Level;\n");
    write(module.join("till").join("mod.rs"), "mod drawer;\n");
    write(module.join("till").join("drawer.rs"), "use crate::shop::price::Price;\n");
    assert!(intra_module_cycles(&root.join("src")).is_empty(), "a chain is no cycle");
    // stock -> price -> stock, written as a `crate::` path in a group.
    write(module.join("stock.rs"), "use crate::shop::{price::Price, Shop};\npub struct Level;\n");
    let cycles = intra_module_cycles(&root.join("src"));
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(cycles[0].ends_with("price -> stock -> price"), "{cycles:?}");
    // A file of a subdirectory that names a sibling of the subdirectory, which names it
    // back: the subdirectory counts as one file.
    write(module.join("stock.rs"), "use super::till::drawer::Drawer;\npub struct Level;\n");
    write(module.join("till").join("drawer.rs"), "use crate::shop::stock::Level;\npub struct Drawer;\n");
    let cycles = intra_module_cycles(&root.join("src"));
    // Tests inside a file name the file as `super`: no edge.
    write(module.join("stock.rs"), "pub struct Level;\n#[cfg(test)]\nmod tests {\n    use super::price::Price;\n}\n");
    write(module.join("price.rs"), "use super::stock::Level;\n");
    let tests_only = intra_module_cycles(&root.join("src"));
    std::fs::remove_dir_all(&root).ok();
    assert_eq!(cycles, vec![format!("{}: stock -> till -> stock", module.display())]);
    assert!(tests_only.is_empty(), "{tests_only:?}");
}
