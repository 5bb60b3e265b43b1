//! Reading documents from disk: `.txt`, `.md`, `.jsonl` and the two JSON corpus shapes.
//! Problems are collected per file (and per line), never fatal for the other files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::Error;

/// A document as read, before chunking.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceDoc {
    pub id: String,
    pub title: String,
    pub text: String,
    pub source: String,
}

/// Something wrong with the input that did not stop the rest of the ingest.
#[derive(Debug)]
pub enum SourceProblem {
    /// The file or one of its lines could not be parsed; counts as a failure.
    Error(Error),
    /// Skipped on purpose (not UTF-8, unsupported extension); a warning.
    Skipped { path: PathBuf, reason: String },
}

#[derive(Debug, Default)]
pub struct ReadOutcome {
    pub docs: Vec<SourceDoc>,
    pub problems: Vec<SourceProblem>,
}

const EXTENSIONS: &[&str] = &["txt", "md", "jsonl", "json"];

/// Files under `paths` (directories recurse, sorted for determinism).
pub fn collect_files(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<SourceProblem>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        walk(path, true, &mut files, &mut problems);
    }
    (files, problems)
}

fn walk(path: &Path, explicit: bool, files: &mut Vec<PathBuf>, problems: &mut Vec<SourceProblem>) {
    if path.is_dir() {
        let entries = match std::fs::read_dir(path) {
            Ok(entries) => entries,
            Err(e) => return problems.push(SourceProblem::Error(Error::io(path, e))),
        };
        let mut children: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        children.sort();
        for child in children {
            walk(&child, false, files, problems);
        }
    } else if !path.exists() {
        problems.push(SourceProblem::Error(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory"),
        )));
    } else if has_supported_extension(path) {
        files.push(path.to_path_buf());
    } else if explicit {
        problems.push(SourceProblem::Skipped {
            path: path.to_path_buf(),
            reason: format!("unsupported extension (expected one of {})", EXTENSIONS.join(", ")),
        });
    }
}

fn has_supported_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

pub fn read_file(path: &Path) -> ReadOutcome {
    let mut out = ReadOutcome::default();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            out.problems.push(SourceProblem::Error(Error::io(path, e)));
            return out;
        }
    };
    let Ok(content) = String::from_utf8(bytes) else {
        out.problems.push(SourceProblem::Skipped {
            path: path.to_path_buf(),
            reason: "not valid UTF-8".into(),
        });
        return out;
    };
    let source = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "jsonl" => read_jsonl(path, &content, &source, &mut out),
        "json" => read_json(path, &content, &source, &mut out),
        "md" => out.docs.push(plain_doc(&content, &source, markdown_title(&content))),
        _ => out.docs.push(plain_doc(&content, &source, None)),
    }
    out.docs.retain(|d| !d.text.trim().is_empty());
    out
}

fn plain_doc(content: &str, source: &str, title: Option<String>) -> SourceDoc {
    let stem = Path::new(source)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| source.to_string());
    SourceDoc {
        id: source.to_string(),
        title: title.unwrap_or(stem),
        text: content.to_string(),
        source: source.to_string(),
    }
}

fn markdown_title(content: &str) -> Option<String> {
    content
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().to_string())
}

#[derive(Deserialize)]
struct JsonlRecord {
    id: Option<serde_json::Value>,
    title: Option<String>,
    text: String,
}

fn read_jsonl(path: &Path, content: &str, source: &str, out: &mut ReadOutcome) {
    let mut ids = IdAllocator::default();
    for (i, line) in content.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<JsonlRecord>(line) {
            Ok(rec) => {
                let title = rec.title.unwrap_or_default();
                let id = match rec.id {
                    Some(serde_json::Value::String(s)) => s,
                    Some(other) => other.to_string(),
                    None if !title.is_empty() => ids.for_title(&title),
                    None => format!("{source}#{}", i + 1),
                };
                out.docs.push(SourceDoc {
                    id,
                    title,
                    text: rec.text,
                    source: source.to_string(),
                });
            }
            Err(e) => out.problems.push(SourceProblem::Error(Error::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            })),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum JsonCorpus {
    /// `[{title, text}, ...]` (MuSiQue corpus, also with an optional `id`).
    List(Vec<JsonlRecord>),
    /// `{title: [sentence, ...]}` (HotpotQA corpus).
    Sentences(HashMap<String, Vec<String>>),
}

fn read_json(path: &Path, content: &str, source: &str, out: &mut ReadOutcome) {
    let corpus: JsonCorpus = match serde_json::from_str(content) {
        Ok(c) => c,
        Err(e) => {
            out.problems.push(SourceProblem::Error(Error::Parse {
                path: path.to_path_buf(),
                line: e.line(),
                message: format!(
                    "{e} (expected a list of {{title, text}} or an object {{title: [sentences]}})"
                ),
            }));
            return;
        }
    };
    match corpus {
        JsonCorpus::List(records) => {
            let mut ids = IdAllocator::default();
            for rec in records {
                let title = rec.title.unwrap_or_default();
                let id = match rec.id {
                    Some(serde_json::Value::String(s)) => s,
                    Some(other) => other.to_string(),
                    None => ids.for_title(&title),
                };
                out.docs.push(SourceDoc {
                    id,
                    title,
                    text: rec.text,
                    source: source.to_string(),
                });
            }
        }
        JsonCorpus::Sentences(map) => {
            let mut titles: Vec<_> = map.into_iter().collect();
            titles.sort_by(|a, b| a.0.cmp(&b.0));
            for (title, sentences) in titles {
                out.docs.push(SourceDoc {
                    id: title.clone(),
                    title,
                    text: join_sentences(&sentences),
                    source: source.to_string(),
                });
            }
        }
    }
}

/// HotpotQA sentences carry their own leading space after the first; others need one.
pub fn join_sentences(sentences: &[String]) -> String {
    let mut text = String::new();
    for s in sentences {
        if !text.is_empty() && !s.starts_with(char::is_whitespace) {
            text.push(' ');
        }
        text.push_str(s);
    }
    text.trim().to_string()
}

/// Titles repeat in real corpora (MuSiQue has 126 repeated titles); the n-th repeat of a
/// title in one file gets the id `title#n`, deterministic for the same file.
#[derive(Default)]
pub struct IdAllocator {
    seen: HashMap<String, usize>,
}

impl IdAllocator {
    pub fn for_title(&mut self, title: &str) -> String {
        let n = self.seen.entry(title.to_string()).or_default();
        *n += 1;
        if *n == 1 {
            title.to_string()
        } else {
            format!("{title}#{n}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    #[test]
    fn jsonl_bad_line_is_reported_with_its_number_and_others_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a.jsonl",
            b"{\"title\":\"A\",\"text\":\"alpha\"}\n{broken\n{\"id\":7,\"text\":\"gamma\"}\n",
        );
        let out = read_file(&p);
        assert_eq!(out.docs.len(), 2);
        assert_eq!(out.docs[1].id, "7");
        match &out.problems[..] {
            [SourceProblem::Error(Error::Parse { line, .. })] => assert_eq!(*line, 2),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn both_corpus_shapes_and_repeated_titles() {
        let dir = tempfile::tempdir().unwrap();
        let list = write(
            dir.path(),
            "l.json",
            br#"[{"title":"T","text":"one"},{"title":"T","text":"two"},{"title":"E","text":"  "}]"#,
        );
        let out = read_file(&list);
        let ids: Vec<_> = out.docs.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, vec!["T", "T#2"], "empty document ignored");
        let sents = write(dir.path(), "s.json", br#"{"X":["First one."," Second one."]}"#);
        let out = read_file(&sents);
        assert_eq!(out.docs[0].text, "First one. Second one.");
    }

    #[test]
    fn non_utf8_is_skipped_and_dirs_recurse() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        write(&dir.path().join("sub"), "ok.md", b"# Title\nbody");
        write(dir.path(), "bad.txt", &[0xff, 0xfe, 0x00]);
        write(dir.path(), "ignored.bin", b"x");
        let (files, problems) = collect_files(&[dir.path().to_path_buf()]);
        assert_eq!(files.len(), 2);
        assert!(problems.is_empty());
        let bad = read_file(&dir.path().join("bad.txt"));
        assert!(matches!(bad.problems[..], [SourceProblem::Skipped { .. }]));
        let md = read_file(&dir.path().join("sub/ok.md"));
        assert_eq!(md.docs[0].title, "Title");
    }
}
