//! Import of precomputed triples: the OpenIE JSON shape of `shared/datasets/musique`
//! (`[{title, text, triples: [[s, r, o], ...]}]`) and plain JSONL
//! (`{doc_title?, chunk?, subject, relation, object}` per line).

use std::collections::HashMap;
use std::path::Path;

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
    pub fn load(path: &Path) -> Result<TripleImport> {
        let content = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let mut import = TripleImport::default();
        let is_jsonl = path.extension().is_some_and(|e| e == "jsonl");
        if is_jsonl {
            for (i, line) in content.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let rec: JsonlTriple = serde_json::from_str(line).map_err(|e| Error::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: e.to_string(),
                })?;
                import.total += 1;
                match triple_from(&[rec.subject.into(), rec.relation.into(), rec.object.into()]) {
                    Some(triple) => import
                        .by_title
                        .entry(rec.doc_title.unwrap_or_default())
                        .or_default()
                        .push(ImportedTriple { triple, chunk: rec.chunk }),
                    None => import.skipped += 1,
                }
            }
        } else {
            let passages: Vec<OpenIePassage> = serde_json::from_str(&content).map_err(|e| Error::Parse {
                path: path.to_path_buf(),
                line: e.line(),
                message: format!("{e} (expected a list of {{title, text, triples}})"),
            })?;
            for p in passages {
                let entry = import.by_passage.entry((p.title, p.text)).or_default();
                for raw in &p.triples {
                    import.total += 1;
                    match triple_from(raw) {
                        Some(triple) => entry.push(ImportedTriple { triple, chunk: None }),
                        None => import.skipped += 1,
                    }
                }
            }
        }
        Ok(import)
    }

    /// The triples for a document, exact duplicates removed (first occurrence kept).
    /// `Some(empty)` when the file lists the passage with no triples: the import still
    /// speaks for it, so the extractor must not add its own.
    pub fn for_document(&self, title: &str, text: &str) -> Option<Vec<ImportedTriple>> {
        let passage = self.by_passage.get(&(title.to_string(), text.to_string()));
        let titled = self.by_title.get(title);
        if passage.is_none() && titled.is_none() {
            return None;
        }
        let mut found: Vec<ImportedTriple> = passage.into_iter().chain(titled).flatten().cloned().collect();
        let mut seen = std::collections::HashSet::new();
        found.retain(|t| seen.insert(t.triple.clone()));
        Some(found)
    }
}

fn triple_from(raw: &[serde_json::Value]) -> Option<RawTriple> {
    let [s, r, o] = raw else { return None };
    let get = |v: &serde_json::Value| v.as_str().map(str::trim).filter(|s| !s.is_empty()).map(String::from);
    Some(RawTriple {
        subject: get(s)?,
        relation: get(r)?,
        object: get(o)?,
    })
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
    }

    #[test]
    fn jsonl_shape_and_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, "{\"doc_title\":\"A\",\"chunk\":1,\"subject\":\"a\",\"relation\":\"r\",\"object\":\"b\"}\n").unwrap();
        let imp = TripleImport::load(&p).unwrap();
        assert_eq!(imp.for_document("A", "anything").unwrap()[0].chunk, Some(1));
        std::fs::write(&p, "{\"subject\":1}\n").unwrap();
        let err = TripleImport::load(&p).unwrap_err().to_string();
        assert!(err.contains("t.jsonl:1"), "{err}");
    }
}
