//! Prompt templates: one file per prompt in `prompts/`, embedded at build time and
//! overridable by a directory in config (`llm.prompts_dir`). Placeholders are `{name}`.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PromptId {
    Answer,
    VerifyRelevance,
    VerifyGrounding,
    VerifyAdequacy,
    RewriteOffTopic,
    RewriteUnsupported,
    RewriteInadequate,
    Summarize,
    ExtractTriples,
    ProposeTriples,
    Sufficiency,
}

impl PromptId {
    pub const ALL: [PromptId; 11] = [
        PromptId::Answer,
        PromptId::VerifyRelevance,
        PromptId::VerifyGrounding,
        PromptId::VerifyAdequacy,
        PromptId::RewriteOffTopic,
        PromptId::RewriteUnsupported,
        PromptId::RewriteInadequate,
        PromptId::Summarize,
        PromptId::ExtractTriples,
        PromptId::ProposeTriples,
        PromptId::Sufficiency,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            PromptId::Answer => "answer.txt",
            PromptId::VerifyRelevance => "verify_relevance.txt",
            PromptId::VerifyGrounding => "verify_grounding.txt",
            PromptId::VerifyAdequacy => "verify_adequacy.txt",
            PromptId::RewriteOffTopic => "rewrite_off_topic.txt",
            PromptId::RewriteUnsupported => "rewrite_unsupported.txt",
            PromptId::RewriteInadequate => "rewrite_inadequate.txt",
            PromptId::Summarize => "summarize.txt",
            PromptId::ExtractTriples => "extract_triples.txt",
            PromptId::ProposeTriples => "propose_triples.txt",
            PromptId::Sufficiency => "sufficiency.txt",
        }
    }

    fn embedded(self) -> &'static str {
        match self {
            PromptId::Answer => include_str!("../../prompts/answer.txt"),
            PromptId::VerifyRelevance => include_str!("../../prompts/verify_relevance.txt"),
            PromptId::VerifyGrounding => include_str!("../../prompts/verify_grounding.txt"),
            PromptId::VerifyAdequacy => include_str!("../../prompts/verify_adequacy.txt"),
            PromptId::RewriteOffTopic => include_str!("../../prompts/rewrite_off_topic.txt"),
            PromptId::RewriteUnsupported => include_str!("../../prompts/rewrite_unsupported.txt"),
            PromptId::RewriteInadequate => include_str!("../../prompts/rewrite_inadequate.txt"),
            PromptId::Summarize => include_str!("../../prompts/summarize.txt"),
            PromptId::ExtractTriples => include_str!("../../prompts/extract_triples.txt"),
            PromptId::ProposeTriples => include_str!("../../prompts/propose_triples.txt"),
            PromptId::Sufficiency => include_str!("../../prompts/sufficiency.txt"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Prompts {
    templates: HashMap<PromptId, String>,
}

impl Prompts {
    pub fn embedded() -> Prompts {
        Prompts { templates: PromptId::ALL.iter().map(|id| (*id, id.embedded().to_string())).collect() }
    }

    /// Embedded prompts, each replaced by `dir/<file>` where that file exists.
    pub fn load(dir: &Path) -> Result<Prompts> {
        let mut prompts = Prompts::embedded();
        if dir.as_os_str().is_empty() {
            return Ok(prompts);
        }
        if !dir.is_dir() {
            return Err(Error::Config(format!("llm.prompts_dir {} is not a directory", dir.display())));
        }
        for id in PromptId::ALL {
            let path = dir.join(id.file_name());
            if path.exists() {
                let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
                prompts.templates.insert(id, text);
            }
        }
        Ok(prompts)
    }

    /// The template with `{name}` placeholders filled in.
    pub fn render(&self, id: PromptId, vars: &[(&str, &str)]) -> String {
        let mut out = self.templates[&id].clone();
        for (name, value) in vars {
            out = out.replace(&format!("{{{name}}}"), value);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_and_override() {
        let p = Prompts::embedded();
        let text = p.render(PromptId::VerifyAdequacy, &[("question", "Who?"), ("answer", "Bob")]);
        assert!(text.contains("Question: Who?") && text.contains("Answer: Bob"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("answer.txt"), "custom {question}").unwrap();
        let p = Prompts::load(dir.path()).unwrap();
        assert_eq!(p.render(PromptId::Answer, &[("question", "q")]), "custom q");
        assert!(p.render(PromptId::Summarize, &[]).contains("Summarise"));
    }
}
