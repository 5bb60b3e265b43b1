//! How the graph's edges were made, over the whole KB and per chunk they were read from.
//!
//! The rule extractor's co-occurrence edges are trusted less than relation-grade ones (an
//! LLM's, an import's, a curator's) where the graph's ranking is fused with the text list. A
//! KB mixes both: a curated or imported collection beside folders ingested with the embedded
//! extractor. Judged over the whole KB, the rule-made part sets the trust of every query's
//! graph evidence, however its walk ran; judged per chunk, a query's evidence is trusted as
//! the edges read from its own passages were made.

use super::model::{ChunkId, Edge, EdgeOrigin};

#[derive(Default)]
pub struct EdgeGrades {
    rule: usize,
    all: usize,
    /// Indexed by chunk id: ids are dense (one counter for every record, `kb::store`), so
    /// the vector costs a few bytes per id the KB has issued.
    by_chunk: Vec<ChunkGrade>,
}

#[derive(Default, Clone, Copy)]
struct ChunkGrade {
    rule: u32,
    all: u32,
}

impl EdgeGrades {
    pub fn add(&mut self, edge: &Edge) {
        let rule = edge.origin == EdgeOrigin::Extracted;
        self.rule += usize::from(rule);
        self.all += 1;
        let at = edge.chunk as usize;
        if at >= self.by_chunk.len() {
            self.by_chunk.resize(at + 1, ChunkGrade::default());
        }
        let grade = &mut self.by_chunk[at];
        grade.rule += u32::from(rule);
        grade.all += 1;
    }

    pub fn remove(&mut self, edge: &Edge) {
        let rule = edge.origin == EdgeOrigin::Extracted;
        self.rule -= usize::from(rule);
        self.all -= 1;
        if let Some(grade) = self.by_chunk.get_mut(edge.chunk as usize) {
            grade.rule -= u32::from(rule);
            grade.all -= 1;
        }
    }

    /// Share of all edges made by the rule extractor (0 for an empty graph).
    pub fn rule_share(&self) -> f32 {
        share(self.rule, self.all).unwrap_or(0.0)
    }

    /// Share of the edges read from `chunks` made by the rule extractor; `None` when they
    /// hold no edge.
    pub fn rule_share_of(&self, chunks: impl IntoIterator<Item = ChunkId>) -> Option<f32> {
        let (rule, all) = chunks
            .into_iter()
            .filter_map(|chunk| self.by_chunk.get(chunk as usize))
            .fold((0, 0), |(rule, all), grade| (rule + grade.rule as usize, all + grade.all as usize));
        share(rule, all)
    }
}

fn share(part: usize, whole: usize) -> Option<f32> {
    (whole > 0).then(|| part as f32 / whole as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(id: u64, chunk: ChunkId, origin: EdgeOrigin) -> Edge {
        Edge { id, subject: 1, relation: "made".into(), object: 2, chunk, origin }
    }

    #[test]
    fn a_chunks_share_counts_only_the_edges_read_from_it() {
        let mut grades = EdgeGrades::default();
        let edges = [
            edge(1, 3, EdgeOrigin::Extracted),
            edge(2, 3, EdgeOrigin::Extracted),
            edge(3, 3, EdgeOrigin::Imported),
            edge(4, 7, EdgeOrigin::Curated),
            edge(5, 7, EdgeOrigin::Llm),
        ];
        edges.iter().for_each(|e| grades.add(e));
        assert_eq!(grades.rule_share(), 2.0 / 5.0);
        assert_eq!(grades.rule_share_of([3]), Some(2.0 / 3.0));
        assert_eq!(grades.rule_share_of([7]), Some(0.0));
        assert_eq!(grades.rule_share_of([3, 7]), Some(2.0 / 5.0));
        assert_eq!(grades.rule_share_of([5, 1000]), None, "chunks with no edge, or never seen, say nothing");

        grades.remove(&edges[0]);
        grades.remove(&edges[1]);
        assert_eq!(grades.rule_share_of([3]), Some(0.0));
        assert_eq!(grades.rule_share(), 0.0);
        grades.remove(&edges[2]);
        assert_eq!(grades.rule_share_of([3]), None);
    }
}
