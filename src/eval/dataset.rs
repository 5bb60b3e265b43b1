//! The evaluation datasets of `shared/datasets` (HotpotQA and MuSiQue shapes).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::ingest::source;

#[derive(Debug, Clone)]
pub struct EvalQuestion {
    pub id: String,
    pub question: String,
    /// The answer and its aliases.
    pub answers: Vec<String>,
    /// Document ids of the gold passages.
    pub gold: Vec<String>,
}

pub struct Dataset {
    pub name: String,
    pub corpus: PathBuf,
    pub questions: Vec<EvalQuestion>,
}

#[derive(Deserialize)]
struct HotpotRecord {
    #[serde(rename = "_id")]
    id: String,
    question: String,
    answer: String,
    supporting_facts: Vec<(String, serde_json::Value)>,
}

#[derive(Deserialize)]
struct MusiqueRecord {
    id: String,
    question: String,
    answer: String,
    #[serde(default)]
    answer_aliases: Vec<String>,
    paragraphs: Vec<MusiqueParagraph>,
}

#[derive(Deserialize)]
struct MusiqueParagraph {
    title: String,
    paragraph_text: String,
    is_supporting: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Records {
    Hotpot(Vec<HotpotRecord>),
    Musique(Vec<MusiqueRecord>),
}

impl Dataset {
    /// Reads `DIR/corpus.json` and `DIR/questions.json`.
    pub fn load(dir: &Path) -> Result<Dataset> {
        let corpus = dir.join("corpus.json");
        let questions_path = dir.join("questions.json");
        for p in [&corpus, &questions_path] {
            if !p.exists() {
                return Err(Error::Invalid(format!(
                    "{} not found (a dataset dir holds corpus.json and questions.json)",
                    p.display()
                )));
            }
        }
        // A dataset the user named on the command line: no size cap.
        let read = source::read_file(&corpus, u64::MAX);
        if let Some(source::SourceProblem::Error(e)) = read.problems.into_iter().next() {
            return Err(e);
        }
        let by_content: HashMap<(String, String), String> =
            read.docs.into_iter().map(|d| ((d.title, d.text), d.id)).collect();
        let raw = std::fs::read_to_string(&questions_path).map_err(|e| Error::io(&questions_path, e))?;
        let records: Records = serde_json::from_str(&raw).map_err(|e| Error::Parse {
            path: questions_path.clone(),
            line: e.line(),
            message: format!("{e} (expected HotpotQA or MuSiQue records)"),
        })?;
        let questions = match records {
            Records::Hotpot(rs) => rs
                .into_iter()
                .map(|r| {
                    let mut gold: Vec<String> = r.supporting_facts.into_iter().map(|(t, _)| t).collect();
                    gold.sort();
                    gold.dedup();
                    EvalQuestion { id: r.id, question: r.question, answers: vec![r.answer], gold }
                })
                .collect(),
            Records::Musique(rs) => rs
                .into_iter()
                .map(|r| {
                    let gold = r
                        .paragraphs
                        .iter()
                        .filter(|p| p.is_supporting)
                        .filter_map(|p| {
                            by_content
                                .get(&(p.title.clone(), p.paragraph_text.trim().to_string()))
                                .or_else(|| by_content.get(&(p.title.clone(), p.paragraph_text.clone())))
                                .cloned()
                        })
                        .collect();
                    let mut answers = vec![r.answer];
                    answers.extend(r.answer_aliases);
                    EvalQuestion { id: r.id, question: r.question, answers, gold }
                })
                .collect(),
        };
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "dataset".into());
        Ok(Dataset { name, corpus, questions })
    }
}
