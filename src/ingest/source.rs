//! Reading documents from disk: one document per `.txt`, `.md`, `.html`, `.docx` or `.pdf`
//! file (read by [`format`]), many per `.jsonl` file or JSON corpus. Problems are collected
//! per file (and per line), never fatal for the other files.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::format::{self, Format};
use crate::error::Error;
use crate::kb::model::Link;

/// A document as read, before chunking.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceDoc {
    pub id: String,
    pub title: String,
    pub text: String,
    pub source: String,
    /// Its hyperlinks, anchors as byte ranges of `text`; a link between files points to the
    /// target's path (see [`resolve_links`]).
    pub links: Vec<Link>,
}

/// Something wrong with the input that did not stop the rest of the ingest.
#[derive(Debug)]
pub enum SourceProblem {
    /// The file or one of its lines could not be parsed; counts as a failure.
    Error(Error),
    /// Skipped on purpose (unsupported extension); a warning.
    Skipped { path: PathBuf, reason: String },
    /// A record's id repeats an earlier record's in the same file; the later one replaces it,
    /// as a later ingest would. A warning: it is often a mistake.
    RepeatedId { path: PathBuf, line: usize, id: String, first_line: usize },
    /// Part of a file could not be read and the rest was ingested (a PDF page without a text
    /// layer); a warning.
    Gap { path: PathBuf, detail: String },
}

#[derive(Debug, Default)]
pub struct ReadOutcome {
    pub docs: Vec<SourceDoc>,
    pub problems: Vec<SourceProblem>,
}

/// Corpus files, many documents each; every other readable file is one ([`Format`]).
const CORPUS_EXTENSIONS: &[&str] = &["jsonl", "json"];

/// What a user may name, for messages.
fn known_extensions() -> String {
    Format::extensions().chain(CORPUS_EXTENSIONS.iter().copied()).collect::<Vec<_>>().join(", ")
}

/// Which files an ingest may read. The CLI reads whatever its user names; the daemon only
/// reads under its configured roots, so a client cannot make it read (and then serve back)
/// any file the daemon's user can read.
#[derive(Debug, Clone)]
pub struct Access {
    /// Canonical directories every file must lie under (after resolving symlinks); `None`
    /// means anywhere.
    roots: Option<Vec<PathBuf>>,
    /// Largest file read; bigger ones are refused before reading.
    pub max_file_bytes: u64,
}

impl Access {
    pub fn anywhere(max_file_bytes: u64) -> Access {
        Access { roots: None, max_file_bytes }
    }

    /// Only files under `roots`. Roots that do not exist are dropped (they contain nothing);
    /// an empty list allows no file at all.
    pub fn within(roots: &[PathBuf], max_file_bytes: u64) -> Access {
        let roots = roots.iter().filter_map(|r| std::fs::canonicalize(r).ok()).collect();
        Access { roots: Some(roots), max_file_bytes }
    }

    /// Whether `canonical` (a resolved path) may be read.
    fn allows(&self, canonical: &Path) -> bool {
        self.roots.as_ref().is_none_or(|roots| roots.iter().any(|r| canonical.starts_with(r)))
    }

    /// Refuses, before any work, an explicitly named path that resolves outside the roots.
    pub fn check(&self, path: &Path) -> Result<(), Error> {
        let Some(roots) = &self.roots else { return Ok(()) };
        if roots.is_empty() {
            return Err(Error::Invalid("ingest of paths is disabled on this server (server.ingest_roots is empty); send the text as `documents`, or configure server.ingest_roots".into()));
        }
        let canonical = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
        if self.allows(&canonical) { Ok(()) } else { Err(outside(path, &canonical)) }
    }
}

fn outside(path: &Path, canonical: &Path) -> Error {
    let via = if path == canonical { String::new() } else { format!(" (resolves to {})", canonical.display()) };
    Error::Invalid(format!(
        "{}{via} is outside server.ingest_roots; only files under those directories can be ingested by path",
        path.display()
    ))
}

/// Files under `paths` (directories recurse, sorted for determinism). Each file is visited
/// once by its canonical path, so symlink loops end and a file reached twice is one document.
pub fn collect_files(paths: &[PathBuf], access: &Access) -> (Vec<PathBuf>, Vec<SourceProblem>) {
    let mut walk = Walk { access, visited: HashSet::new(), revisits: 0, files: Vec::new(), problems: Vec::new() };
    for path in paths {
        walk.visit(path, true);
    }
    (walk.files, walk.problems)
}

struct Walk<'a> {
    access: &'a Access,
    visited: HashSet<PathBuf>,
    /// Paths reached again (through a link, or named twice): read once, found all the same.
    revisits: usize,
    files: Vec<PathBuf>,
    problems: Vec<SourceProblem>,
}

impl Walk<'_> {
    fn visit(&mut self, path: &Path, explicit: bool) {
        let canonical = match std::fs::canonicalize(path) {
            Ok(c) => c,
            Err(e) => return self.problems.push(SourceProblem::Error(Error::io(path, e))),
        };
        if !self.access.allows(&canonical) {
            return self.problems.push(SourceProblem::Error(outside(path, &canonical)));
        }
        if !self.visited.insert(canonical.clone()) {
            self.revisits += 1;
            return;
        }
        let meta = match std::fs::metadata(&canonical) {
            Ok(m) => m,
            Err(e) => return self.problems.push(SourceProblem::Error(Error::io(path, e))),
        };
        if meta.is_dir() {
            let entries = match std::fs::read_dir(&canonical) {
                Ok(entries) => entries,
                Err(e) => return self.problems.push(SourceProblem::Error(Error::io(path, e))),
            };
            let mut children: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            children.sort();
            let before = (self.files.len(), self.problems.len(), self.revisits);
            for child in children {
                // Keep the name the user gave: problems are reported by it.
                self.visit(&path.join(child.file_name().unwrap_or_default()), false);
            }
            // Silence there reads as success: say why nothing came of it.
            if explicit && (self.files.len(), self.problems.len(), self.revisits) == before {
                self.problems.push(SourceProblem::Skipped {
                    path: path.to_path_buf(),
                    reason: format!("no file in it to read (expected one of {})", known_extensions()),
                });
            }
        } else if !has_supported_extension(path) {
            if explicit {
                self.problems.push(SourceProblem::Skipped {
                    path: path.to_path_buf(),
                    reason: format!("unsupported extension (expected one of {})", known_extensions()),
                });
            }
        } else if !meta.is_file() {
            self.problems.push(SourceProblem::Error(Error::Invalid(format!(
                "{}: not a regular file (a FIFO, device or socket is never read)",
                path.display()
            ))));
        } else {
            self.files.push(path.to_path_buf());
        }
    }
}

fn has_supported_extension(path: &Path) -> bool {
    Format::of(path).is_some()
        || path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| CORPUS_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The bytes of a regular file of at most `max` bytes. Opened without blocking and checked
/// on the open handle, so a path swapped for a FIFO or device after the walk is still refused.
fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Linux's value; opening a FIFO for reading must not wait for a writer.
    const O_NONBLOCK: i32 = 0o4000;
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(O_NONBLOCK).open(path).map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::Invalid(format!(
            "{}: not a regular file (a FIFO, device or socket is never read)",
            path.display()
        )));
    }
    if meta.len() > max {
        return Err(Error::Invalid(format!(
            "{}: {} bytes is over ingest.max_file_bytes ({max}); split the file or raise the limit",
            path.display(),
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > max {
        return Err(Error::Invalid(format!(
            "{}: grew past ingest.max_file_bytes ({max}) while being read",
            path.display()
        )));
    }
    Ok(bytes)
}

/// The file's lines that are valid UTF-8, joined again; each invalid line is an error with
/// its number, so one bad byte costs one line, not the file.
fn decode_lines(path: &Path, bytes: &[u8], problems: &mut Vec<SourceProblem>) -> String {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return text.to_string();
    }
    let mut text = String::with_capacity(bytes.len());
    for (i, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        match std::str::from_utf8(line) {
            Ok(line) => text.push_str(line),
            Err(e) => {
                problems.push(SourceProblem::Error(Error::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: format!(
                        "not valid UTF-8 (byte {} of the line); the line was left out",
                        e.valid_up_to() + 1
                    ),
                }));
                if line.ends_with(b"\n") {
                    text.push('\n');
                }
            }
        }
    }
    text
}

pub fn read_file(path: &Path, max_file_bytes: u64) -> ReadOutcome {
    let mut out = ReadOutcome::default();
    let bytes = match read_bounded(path, max_file_bytes) {
        Ok(b) => b,
        Err(e) => {
            out.problems.push(SourceProblem::Error(e));
            return out;
        }
    };
    let source = document_path(path);
    let ext = path.extension().and_then(|e| e.to_str()).map(|e| e.to_ascii_lowercase()).unwrap_or_default();
    let file_format = Format::of(path);
    if let Some(binary) = file_format.filter(|f| !f.is_text()) {
        match format::extract_binary(binary, &bytes, path) {
            Ok(extracted) => push_extracted(path, &source, extracted, &mut out),
            Err(e) => out.problems.push(SourceProblem::Error(e)),
        }
        return finish(path, out);
    }
    let content = decode_lines(path, &bytes, &mut out.problems);
    // A byte-order mark some editors write is no text ("\u{feff}# Title" is a heading).
    let content = content.strip_prefix('\u{feff}').unwrap_or(&content);
    match ext.as_str() {
        "jsonl" => read_jsonl(path, content, &source, &mut out),
        // A JSON document is one value: a bad line breaks it whole, so parse it only when
        // every line decoded.
        "json" if !out.problems.is_empty() => {}
        "json" => read_json(path, content, &source, &mut out),
        _ => {
            let extracted = format::extract_text(file_format.unwrap_or(Format::Text), content);
            push_extracted(path, &source, extracted, &mut out);
        }
    }
    finish(path, out)
}

fn push_extracted(path: &Path, source: &str, extracted: format::Extracted, out: &mut ReadOutcome) {
    out.problems
        .extend(extracted.gaps.into_iter().map(|detail| SourceProblem::Gap { path: path.to_path_buf(), detail }));
    let mut doc = plain_doc(&extracted.text, source, extracted.title);
    doc.links = resolve_links(Path::new(source), extracted.links);
    out.docs.push(doc);
}

/// The links of the file at `path` that point to another file, each target resolved against
/// the file's folder to that file's path, which names its document ([`document_path`]).
/// Links with a scheme (the web, mail) and links within the page name no document here and
/// are dropped; `#section` and `?query` parts are no part of the file.
fn resolve_links(path: &Path, links: Vec<Link>) -> Vec<Link> {
    let Some(folder) = path.parent() else {
        return Vec::new();
    };
    links
        .into_iter()
        .filter_map(|link| {
            let target = link.target.split(['#', '?']).next().unwrap_or_default().replace("%20", " ");
            let scheme = target.split_once(':').is_some_and(|(s, _)| !s.is_empty() && !s.contains('/'));
            if target.is_empty() || scheme {
                return None;
            }
            let mut resolved = PathBuf::new();
            for part in folder.join(&target).components() {
                match part {
                    std::path::Component::ParentDir => {
                        resolved.pop();
                    }
                    std::path::Component::CurDir => {}
                    other => resolved.push(other),
                }
            }
            (resolved != path).then(|| Link { anchor: link.anchor, target: document_path(&resolved) })
        })
        .collect()
}

/// Drops documents without text, saying so.
fn finish(path: &Path, mut out: ReadOutcome) -> ReadOutcome {
    let before = out.docs.len();
    out.docs.retain(|d| !d.text.trim().is_empty());
    let reason = match before - out.docs.len() {
        // A corpus or JSONL file that parsed to nothing at all, and said nothing.
        0 if before == 0 && out.problems.is_empty() => Some("no records in it".to_string()),
        0 => None,
        1 if before == 1 => Some("no text in it".to_string()),
        1 => Some("a record without text".to_string()),
        n => Some(format!("{n} records without text")),
    };
    if let Some(reason) = reason {
        out.problems.push(SourceProblem::Skipped { path: path.to_path_buf(), reason });
    }
    out
}

/// The name a file's documents go by (their id, `{name}#{line}` for a JSONL record without
/// id or title, and their source): the file's canonical path, so that `in/a.txt`,
/// `./in/a.txt`, `a.txt` from inside `in` and a link to it are one document, as they are one
/// file to the walk.
pub fn document_path(path: &Path) -> String {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// The id earlier builds gave the document `id` read from `path`, whose name is now `name`
/// ([`document_path`], as its documents' `source` holds it): they named it by the path as
/// given. `None` where that is the same id, or `id` does not come from the path.
pub fn earlier_id(id: &str, name: &str, path: &Path) -> Option<String> {
    let given = path.display().to_string();
    let rest = id.strip_prefix(name)?;
    (rest.is_empty() || rest.starts_with('#')).then(|| format!("{given}{rest}")).filter(|earlier| earlier != id)
}

fn plain_doc(content: &str, source: &str, title: Option<String>) -> SourceDoc {
    let stem =
        Path::new(source).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| source.to_string());
    SourceDoc {
        id: source.to_string(),
        title: title.unwrap_or(stem),
        text: content.to_string(),
        source: source.to_string(),
        links: Vec::new(),
    }
}

#[derive(Deserialize)]
#[serde(expecting = "an object {\"id\"?, \"title\"?, \"text\"}")]
struct JsonlRecord {
    id: Option<serde_json::Value>,
    title: Option<String>,
    text: String,
}

fn read_jsonl(path: &Path, content: &str, source: &str, out: &mut ReadOutcome) {
    let records = content
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| (i + 1, serde_json::from_str::<JsonlRecord>(line)));
    read_records(path, source, records, out);
}

/// Documents of `{id?, title?, text}` records, each with the line it starts on: a bad record
/// is reported by its line and the others are kept. A record without id is named by its
/// title (`title#n` for the n-th repeat), else by its line (`{source}#{line}`).
fn read_records(
    path: &Path,
    source: &str,
    records: impl Iterator<Item = (usize, serde_json::Result<JsonlRecord>)>,
    out: &mut ReadOutcome,
) {
    let mut ids = IdAllocator::default();
    let mut lines_of: HashMap<String, usize> = HashMap::new();
    for (line, record) in records {
        match record {
            Ok(rec) => {
                let title = rec.title.unwrap_or_default();
                let id = match rec.id {
                    Some(serde_json::Value::String(s)) => s,
                    Some(other) => other.to_string(),
                    None if !title.is_empty() => ids.for_title(&title),
                    None => format!("{source}#{line}"),
                };
                if let Some(first_line) = lines_of.insert(id.clone(), line) {
                    let repeat =
                        SourceProblem::RepeatedId { path: path.to_path_buf(), line, id: id.clone(), first_line };
                    out.problems.push(repeat);
                }
                out.docs.push(SourceDoc { id, title, text: rec.text, source: source.to_string(), links: Vec::new() });
            }
            Err(e) => out.problems.push(SourceProblem::Error(Error::Parse {
                path: path.to_path_buf(),
                line,
                message: e.to_string(),
            })),
        }
    }
}

/// A JSON corpus: `[{id?, title, text}, ...]` (MuSiQue's, read record by record, like JSONL)
/// or `{title: [sentence, ...]}` (HotpotQA's).
fn read_json(path: &Path, content: &str, source: &str, out: &mut ReadOutcome) {
    let wrong =
        |line: usize, message: String| SourceProblem::Error(Error::Parse { path: path.to_path_buf(), line, message });
    const SHAPE: &str = "not a corpus (a list of {\"title\", \"text\"} or an object {\"title\": [sentences]})";
    match content.trim_start().chars().next() {
        Some('[') => match serde_json::from_str::<Vec<&serde_json::value::RawValue>>(content) {
            Ok(raw) => {
                let line_of = |raw: &serde_json::value::RawValue| {
                    let offset = raw.get().as_ptr() as usize - content.as_ptr() as usize;
                    content[..offset].matches('\n').count() + 1
                };
                let records = raw.into_iter().map(|r| (line_of(r), serde_json::from_str::<JsonlRecord>(r.get())));
                read_records(path, source, records, out);
            }
            Err(e) => out.problems.push(wrong(e.line().max(1), e.to_string())),
        },
        Some('{') => match serde_json::from_str::<HashMap<String, Vec<String>>>(content) {
            Ok(map) => {
                let mut titles: Vec<_> = map.into_iter().collect();
                titles.sort_by(|a, b| a.0.cmp(&b.0));
                for (title, sentences) in titles {
                    out.docs.push(SourceDoc {
                        id: title.clone(),
                        title,
                        text: join_sentences(&sentences),
                        source: source.to_string(),
                        links: Vec::new(),
                    });
                }
            }
            Err(e) => out.problems.push(wrong(e.line().max(1), format!("{e}; {SHAPE}"))),
        },
        _ => out.problems.push(wrong(1, SHAPE.to_string())),
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
        if *n == 1 { title.to_string() } else { format!("{title}#{n}") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 1 << 20;

    fn anywhere() -> Access {
        Access::anywhere(MAX)
    }

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
        let out = read_file(&p, MAX);
        assert_eq!(out.docs.len(), 2);
        assert_eq!(out.docs[1].id, "7");
        match &out.problems[..] {
            [SourceProblem::Error(Error::Parse { line, .. })] => assert_eq!(*line, 2),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn what_reads_as_nothing_or_twice_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let bom = write(dir.path(), "b.md", "\u{feff}# BOM title\nBody.".as_bytes());
        let out = read_file(&bom, MAX);
        assert_eq!((out.docs[0].title.as_str(), out.docs[0].text.as_str()), ("BOM title", "# BOM title\nBody."));
        let blank = write(dir.path(), "blank.jsonl", b"\n \n");
        let out = read_file(&blank, MAX);
        assert!(matches!(&out.problems[..], [SourceProblem::Skipped { reason, .. }] if reason == "no records in it"));
        let empty = write(dir.path(), "e.txt", b" \n");
        let out = read_file(&empty, MAX);
        assert!(out.docs.is_empty());
        assert!(matches!(&out.problems[..], [SourceProblem::Skipped { reason, .. }] if reason == "no text in it"));
        let twice =
            write(dir.path(), "t.jsonl", b"{\"id\":\"a\",\"text\":\"one\"}\n\n{\"id\":\"a\",\"text\":\"two\"}\n");
        let out = read_file(&twice, MAX);
        assert_eq!(out.docs.len(), 2, "the later record replaces the earlier at ingest");
        assert!(
            matches!(&out.problems[..], [SourceProblem::RepeatedId { line: 3, first_line: 1, id, .. }] if id == "a"),
            "{:?}",
            out.problems
        );
        let other = write(dir.path(), "o.json", br#"{"x": 1}"#);
        let message = match &read_file(&other, MAX).problems[..] {
            [SourceProblem::Error(e)] => e.to_string(),
            other => panic!("{other:?}"),
        };
        let shape = "not a corpus (a list of {\"title\", \"text\"} or an object {\"title\": [sentences]})";
        assert!(message.contains("o.json:1: ") && message.ends_with(shape), "{message}");
        // A list is read record by record: a bad one is named by its line, the rest kept.
        let list = write(
            dir.path(),
            "l.json",
            b"[\n{\"title\": \"A\", \"text\": \"alpha\"},\n{\"title\": \"B\"},\n{\"text\": \"gamma\"}\n]",
        );
        let out = read_file(&list, MAX);
        let ids: Vec<&str> = out.docs.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["A".to_string(), format!("{}#4", document_path(&list))]);
        assert!(
            matches!(&out.problems[..], [SourceProblem::Error(Error::Parse { line: 3, message, .. })] if message.contains("missing field `text`")),
            "{:?}",
            out.problems
        );
        std::fs::create_dir(dir.path().join("csv")).unwrap();
        write(&dir.path().join("csv"), "x.csv", b"a,b");
        let inside = write(&dir.path().join("csv"), "y.txt", b"text");
        let (files, problems) = collect_files(&[inside.clone(), dir.path().join("csv")], &anywhere());
        assert_eq!((files, problems.len()), (vec![inside.clone()], 0), "its one file was named first: {problems:?}");
        std::fs::remove_file(inside).unwrap();
        let (files, problems) = collect_files(&[dir.path().join("csv")], &anywhere());
        assert!(files.is_empty());
        assert!(
            matches!(&problems[..], [SourceProblem::Skipped { reason, .. }] if reason.starts_with("no file in it"))
        );
    }

    #[test]
    fn a_file_is_one_document_however_its_path_is_typed() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "a.txt", b"alpha");
        std::os::unix::fs::symlink(&file, dir.path().join("link.txt")).unwrap();
        let canonical = std::fs::canonicalize(&file).unwrap().display().to_string();
        for typed in [file.clone(), dir.path().join("./a.txt"), dir.path().join("link.txt"), relative_from_here(&file)]
        {
            assert_eq!(read_file(&typed, MAX).docs[0].id, canonical, "{typed:?}");
        }
        // What earlier builds called it: the path as typed, and a JSONL record's line after it.
        let typed = relative_from_here(&file);
        assert_eq!(earlier_id(&canonical, &canonical, &typed), Some(typed.display().to_string()));
        let record = format!("{canonical}#3");
        assert_eq!(earlier_id(&record, &canonical, &typed), Some(format!("{}#3", typed.display())));
        assert_eq!(earlier_id(&canonical, &canonical, Path::new(&canonical)), None, "the same id");
        assert_eq!(earlier_id("curie", &canonical, &typed), None, "an id of its own");
    }

    /// `path` (absolute) as a path relative to the current directory.
    fn relative_from_here(path: &Path) -> PathBuf {
        let here = std::env::current_dir().unwrap();
        let up = here.components().count() - 1;
        let mut relative: PathBuf = std::iter::repeat_n("..", up).collect();
        relative.push(path.strip_prefix("/").unwrap());
        relative
    }

    #[test]
    fn both_corpus_shapes_and_repeated_titles() {
        let dir = tempfile::tempdir().unwrap();
        let list = write(
            dir.path(),
            "l.json",
            br#"[{"title":"T","text":"one"},{"title":"T","text":"two"},{"title":"E","text":"  "}]"#,
        );
        let out = read_file(&list, MAX);
        let ids: Vec<_> = out.docs.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, vec!["T", "T#2"], "empty document ignored");
        let sents = write(dir.path(), "s.json", br#"{"X":["First one."," Second one."]}"#);
        let out = read_file(&sents, MAX);
        assert_eq!(out.docs[0].text, "First one. Second one.");
    }

    /// Issue 34: a link between files names the target's document; the web, mail and the
    /// page itself name none.
    #[test]
    fn links_between_files_point_to_the_target_documents_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("teams")).unwrap();
        std::fs::write(dir.path().join("teams/harbour.md"), "# Harbour\n\nRuns the port.\n").unwrap();
        let page = dir.path().join("services/lantern.md");
        std::fs::create_dir_all(page.parent().unwrap()).unwrap();
        let text = "# Lantern\n\nOwned by [Harbour](../teams/harbour.md#people); see [the web](https://x.org), \
                    [mail](mailto:a@x.org), [this page](#top) and [itself](lantern.md).\n";
        std::fs::write(&page, text).unwrap();
        let doc = read_file(&page, 1 << 20).docs.pop().unwrap();
        let harbour = document_path(&dir.path().join("teams/harbour.md"));
        assert_eq!(doc.links.len(), 1, "{:?}", doc.links);
        assert_eq!(doc.links[0].target, harbour);
        assert_eq!(&doc.text[doc.links[0].anchor.0..doc.links[0].anchor.1], "Harbour");
        assert!(doc.text.contains("Owned by Harbour; see the web, mail, this page and itself."));
    }

    #[test]
    fn dirs_recurse_and_unsupported_files_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        write(&dir.path().join("sub"), "ok.md", b"# Title\nbody");
        write(dir.path(), "other.txt", b"text");
        write(dir.path(), "ignored.bin", b"x");
        let (files, problems) = collect_files(&[dir.path().to_path_buf()], &anywhere());
        assert_eq!(files.len(), 2);
        assert!(problems.is_empty());
        let md = read_file(&dir.path().join("sub/ok.md"), MAX);
        assert_eq!(md.docs[0].title, "Title");
    }

    /// Issue 17: one bad byte dropped a whole `.txt` (only a warning), and one invalid-UTF-8
    /// line dropped a whole `.jsonl`.
    #[test]
    fn invalid_utf8_costs_one_line_and_is_an_error_with_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let txt = write(dir.path(), "bad.txt", b"first line\nsecond \xff line\nthird line\n");
        let out = read_file(&txt, MAX);
        assert_eq!(out.docs[0].text, "first line\n\nthird line\n");
        assert!(matches!(out.problems[..], [SourceProblem::Error(Error::Parse { line: 2, .. })]), "{:?}", out.problems);
        let jsonl = write(
            dir.path(),
            "bad.jsonl",
            b"{\"id\":\"a\",\"text\":\"alpha\"}\n{\"id\":\"b\",\"text\":\"\xfe\"}\n{\"id\":\"c\",\"text\":\"gamma\"}\n",
        );
        let out = read_file(&jsonl, MAX);
        let ids: Vec<_> = out.docs.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert!(matches!(out.problems[..], [SourceProblem::Error(Error::Parse { line: 2, .. })]), "{:?}", out.problems);
    }

    /// Issue 17: a directory with a symlink loop ingested the same file 41 times.
    #[test]
    fn symlink_loops_end_and_each_file_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.txt", b"alpha");
        std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a.txt"), dir.path().join("same.txt")).unwrap();
        let (files, problems) = collect_files(&[dir.path().to_path_buf()], &anywhere());
        assert_eq!(files, [dir.path().join("a.txt")]);
        assert!(problems.is_empty(), "{problems:?}");
    }

    /// Issue 17: a FIFO held the write lock forever, /dev/zero read until memory ran out.
    #[test]
    fn only_regular_files_under_the_size_cap_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.txt")).unwrap();
        let fifo = dir.path().join("pipe.txt");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let (files, problems) = collect_files(&[dir.path().to_path_buf()], &anywhere());
        assert!(files.is_empty(), "{files:?}");
        assert_eq!(problems.len(), 2, "{problems:?}");
        for path in [fifo, dir.path().join("zero.txt")] {
            let out = read_file(&path, MAX);
            assert!(out.docs.is_empty());
            assert!(format!("{:?}", out.problems).contains("not a regular file"), "{:?}", out.problems);
        }
        let big = write(dir.path(), "big.txt", &[b'a'; 100]);
        let out = read_file(&big, 99);
        assert!(format!("{:?}", out.problems).contains("max_file_bytes"), "{:?}", out.problems);
        assert_eq!(read_file(&big, 100).docs.len(), 1);
    }

    /// Issue 17: any file the daemon could read could be ingested over RPC, symlinks included.
    #[test]
    fn confined_access_refuses_paths_and_symlinks_outside_the_roots() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let secret = write(elsewhere.path(), "secret.txt", b"password");
        let inside = write(root.path(), "ok.txt", b"fine");
        std::os::unix::fs::symlink(&secret, root.path().join("link.txt")).unwrap();
        let access = Access::within(&[root.path().to_path_buf()], MAX);
        assert!(access.check(&inside).is_ok());
        assert!(access.check(&secret).unwrap_err().to_string().contains("outside server.ingest_roots"));
        let err = access.check(&root.path().join("link.txt")).unwrap_err().to_string();
        assert!(err.contains("resolves to") && err.contains("outside"), "{err}");
        let (files, problems) = collect_files(&[root.path().to_path_buf()], &access);
        assert_eq!(files, [inside]);
        assert!(format!("{problems:?}").contains("outside server.ingest_roots"), "{problems:?}");
        let none = Access::within(&[], MAX);
        assert!(none.check(&secret).unwrap_err().to_string().contains("ingest_roots is empty"));
    }
}
