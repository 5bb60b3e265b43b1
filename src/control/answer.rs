//! What a reader answers and what a check says of it: the data the roles pass between
//! them, apart from the roles themselves so that the reader and the checks read it without
//! reading each other or the roles that call them.

use serde::{Deserialize, Serialize};

use crate::kb::model::ChunkId;
use crate::retrieve::PathHop;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReaderAnswer {
    pub answer: String,
    /// Chunks the answer was read from.
    pub used: Vec<ChunkId>,
    /// The reader's belief in the answer, in [0, 1]; 0 for no answer.
    pub confidence: f32,
    pub form: AnswerForm,
    /// The graph path from a question entity to the answer, when the reader walked one.
    pub path: Vec<PathHop>,
}

/// What an answer is: a short span (a name, date, amount, yes/no), or a whole sentence,
/// which only a free-form question may get.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerForm {
    #[default]
    Span,
    Sentence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    Relevance,
    Grounding,
    Adequacy,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub check: Check,
    pub pass: bool,
    /// How strongly the check holds, in [0, 1] (0 when it fails); folded into the answer's
    /// confidence.
    pub score: f32,
    pub reason: String,
}
