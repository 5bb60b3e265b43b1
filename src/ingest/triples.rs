//! Import of precomputed triples: the OpenIE JSON shape of `shared/datasets/musique`
//! (`[{title, text, triples: [[s, r, o], ...]}]`) and plain JSONL
//! (`{doc_title?, chunk?, subject, relation, object}` per line).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::kb::model::RawTriple;

/// Triples keyed by the passage they belong to.
#[derive(Debug, Default)]
pub struct TripleImport {
    /// By (title, text): the OpenIE shape identifies passages by their content.
    by_passage: HashMap<(String, String), Vec<ImportedTriple>>,
    /// By title alone (JSONL `doc_title`).
    by_title: HashMap<String, Vec<ImportedTriple>>,
    /// Triples that were malformed (not three non-empty strings) and were skipped.
    pub skipped: usize,
    pub total: usize,
    /// Why each skipped triple (or unreadable line) was left out, with its place in the file.
    rejected: Vec<String>,
    /// The passages and titles some ingested document took triples from.
    used: Mutex<Used>,
    path: PathBuf,
}

#[derive(Debug, Default)]
struct Used {
    passages: HashSet<(String, String)>,
    titles: HashSet<String>,
}

/// Imported triples that went nowhere: how many, and the message for the ingest report.
#[derive(Debug, Clone, PartialEq)]
pub struct DroppedTriples {
    pub triples: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImportedTriple {
    pub triple: RawTriple,
    /// Chunk ordinal within the document, when the file says.
    pub chunk: Option<u32>,
}

#[derive(Deserialize)]
struct OpenIePassage {
    title: String,
    text: String,
    #[serde(default)]
    triples: Vec<Vec<serde_json::Value>>,
}

#[derive(Deserialize)]
struct JsonlTriple {
    doc_title: Option<String>,
    chunk: Option<u32>,
    subject: String,
    relation: String,
    object: String,
}

impl TripleImport {
    /// Reads a triples file. A file that cannot be read or parsed at all is an error; a bad
    /// JSONL line or a malformed triple is recorded (see [`TripleImport::problems`]) and the
    /// rest is kept.
    pub fn load(path: &Path) -> Result<TripleImport> {
        let content = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let mut import = TripleImport { path: path.to_path_buf(), ..TripleImport::default() };
        let is_jsonl = path.extension().is_some_and(|e| e == "jsonl");
        if is_jsonl {
            for (i, line) in content.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                import.total += 1;
                let rec: JsonlTriple = match serde_json::from_str(line) {
                    Ok(rec) => rec,
                    Err(e) => {
                        import.reject(format!("line {}: {e}", i + 1));
                        continue;
                    }
                };
                match triple_from(&[rec.subject.into(), rec.relation.into(), rec.object.into()]) {
                    Some(triple) => import
                        .by_title
                        .entry(rec.doc_title.unwrap_or_default())
                        .or_default()
                        .push(ImportedTriple { triple, chunk: rec.chunk }),
                    None => {
                        import.reject(format!("line {}: subject, relation and object must be non-empty strings", i + 1))
                    }
                }
            }
        } else {
            let passages: Vec<OpenIePassage> = serde_json::from_str(&content).map_err(|e| Error::Parse {
                path: path.to_path_buf(),
                line: e.line(),
                message: format!("{e} (expected a list of {{title, text, triples}})"),
            })?;
            for (p_index, p) in passages.into_iter().enumerate() {
                let mut kept = Vec::new();
                for (t_index, raw) in p.triples.iter().enumerate() {
                    import.total += 1;
                    match triple_from(raw) {
                        Some(triple) => kept.push(ImportedTriple { triple, chunk: None }),
                        None => import.reject(format!(
                            "passage {p_index} (`{}`) triple {t_index}: expected three non-empty strings, got {}",
                            p.title,
                            serde_json::Value::from(raw.clone())
                        )),
                    }
                }
                import.by_passage.entry((p.title, p.text)).or_default().extend(kept);
            }
        }
        Ok(import)
    }

    fn reject(&mut self, why: String) {
        self.skipped += 1;
        self.rejected.push(why);
    }

    /// Every triple that did not reach the graph through a document: malformed ones, and
    /// those whose passage or title matched no document ingested with this import.
    pub fn problems(&self) -> Vec<DroppedTriples> {
        let file = self.path.display();
        let mut out: Vec<DroppedTriples> = self
            .rejected
            .iter()
            .map(|why| DroppedTriples { triples: 1, message: format!("{file}: {why}; triple left out") })
            .collect();
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let mut unmatched: Vec<(String, usize)> = self
            .by_passage
            .iter()
            .filter(|(key, triples)| !triples.is_empty() && !used.passages.contains(*key))
            .map(|((title, _), triples)| (format!("passage `{title}`"), triples.len()))
            .chain(
                self.by_title
                    .iter()
                    .filter(|(title, _)| !used.titles.contains(*title))
                    .map(|(title, triples)| (format!("doc_title `{title}`"), triples.len())),
            )
            .collect();
        unmatched.sort();
        out.extend(unmatched.into_iter().map(|(what, n)| DroppedTriples {
            triples: n,
            message: format!(
                "{file}: {n} triple(s) for {what} left out: no ingested document has that title (and text)"
            ),
        }));
        out
    }

    /// The triples for a document, exact duplicates removed (first occurrence kept).
    /// `Some(empty)` when the file lists the passage with no triples: the import still
    /// speaks for it, so the extractor must not add its own.
    pub fn for_document(&self, title: &str, text: &str) -> Option<Vec<ImportedTriple>> {
        let key = (title.to_string(), text.to_string());
        let passage = self.by_passage.get(&key);
        let titled = self.by_title.get(title);
        if passage.is_none() && titled.is_none() {
            return None;
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if passage.is_some() {
            used.passages.insert(key);
        }
        if titled.is_some() {
            used.titles.insert(title.to_string());
        }
        drop(used);
        let mut found: Vec<ImportedTriple> = passage.into_iter().chain(titled).flatten().cloned().collect();
        let mut seen = std::collections::HashSet::new();
        found.retain(|t| seen.insert(t.triple.clone()));
        Some(found)
    }
}

fn triple_from(raw: &[serde_json::Value]) -> Option<RawTriple> {
    let [s, r, o] = raw else { return None };
    let get = |v: &serde_json::Value| v.as_str().map(str::trim).filter(|s| !s.is_empty()).map(String::from);
    Some(RawTriple { subject: get(s)?, relation: get(r)?, object: get(o)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openie_shape_skips_malformed_and_dedups() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        std::fs::write(
            &p,
            r#"[{"title":"A","text":"x","entities":[],"triples":[["a","r","b"],["a","r","b"],["a",""," c"],["only","two"]]}]"#,
        )
        .unwrap();
        let imp = TripleImport::load(&p).unwrap();
        assert_eq!((imp.total, imp.skipped), (4, 2));
        assert_eq!(imp.for_document("A", "x").unwrap().len(), 1);
        assert!(imp.for_document("A", "other text").is_none());
        let problems = imp.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[1].message.contains("triple 3") && problems[1].message.contains(r#"["only","two"]"#),
            "{problems:?}"
        );
    }

    #[test]
    fn jsonl_shape_and_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, "{\"doc_title\":\"A\",\"chunk\":1,\"subject\":\"a\",\"relation\":\"r\",\"object\":\"b\"}\n")
            .unwrap();
        let imp = TripleImport::load(&p).unwrap();
        assert_eq!(imp.for_document("A", "anything").unwrap()[0].chunk, Some(1));
        assert!(imp.problems().is_empty(), "every triple was taken");
        std::fs::write(
            &p,
            "{\"subject\":1}\n{\"doc_title\":\"B\",\"subject\":\"a\",\"relation\":\"r\",\"object\":\"b\"}\n",
        )
        .unwrap();
        let imp = TripleImport::load(&p).unwrap();
        assert_eq!(imp.for_document("B", "x").unwrap().len(), 1, "the good line is kept");
        let problems = imp.problems();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains("t.jsonl: line 1"), "{problems:?}");
    }

    /// Issue 17: triples with 2 or 4 elements, numbers, or for no document were dropped
    /// without a word.
    #[test]
    fn every_dropped_triple_is_counted_and_explained() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        std::fs::write(
            &p,
            r#"[{"title":"A","text":"x","triples":[["a","r","b"],["a","r"],["a","r","b","c"],[1,"r","b"]]},{"title":"Nowhere","text":"y","triples":[["c","r","d"],["e","r","f"]]}]"#,
        )
        .unwrap();
        let imp = TripleImport::load(&p).unwrap();
        imp.for_document("A", "x");
        let problems = imp.problems();
        assert_eq!(problems.iter().map(|p| p.triples).sum::<usize>(), 5, "{problems:?}");
        assert!(problems.last().unwrap().message.contains("`Nowhere`"), "{problems:?}");
    }
}
