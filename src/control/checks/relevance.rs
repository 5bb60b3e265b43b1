//! Relevance: the evidence mentions every entity the question names.

use crate::control::question::Question;
use crate::retrieve::Retrieval;
use crate::text;

pub(super) fn relevance(q: &Question, r: &Retrieval) -> (bool, f32, String) {
    let missing: Vec<&String> = q
        .entities
        .iter()
        .filter(|e| !r.chunks.iter().any(|c| text::names(&c.title, e) || text::names(&c.text, e)))
        .collect();
    if missing.is_empty() {
        (true, 1.0, format!("the evidence mentions all {} entities the question names", q.entities.len()))
    } else {
        let missing: Vec<String> = missing.iter().map(|m| format!("`{m}`")).collect();
        (false, 0.0, format!("the evidence never mentions {}", missing.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use crate::control::answer::Check;
    use crate::control::checks::{run, span};
    use crate::retrieve::testing::retrieval;

    #[test]
    fn relevance_rejects_evidence_missing_an_entity_the_question_names() {
        let mill = ("Kell Mill", "Kell Mill was founded by Ada Lind in 1881.");
        let q = "Which miller ran Kell Mill and the Orwick Granary?";
        let v = run(Check::Relevance, q, &span("x", &[0], Vec::new()), Some(&retrieval(&[mill])));
        assert!(!v.pass && v.reason.contains("Orwick Granary"), "{v:?}");
        let granary = ("Orwick Granary", "The Orwick Granary stored grain.");
        assert!(run(Check::Relevance, q, &span("x", &[0], Vec::new()), Some(&retrieval(&[mill, granary]))).pass);
        assert!(!run(Check::Relevance, q, &span("x", &[0], Vec::new()), None).pass);
    }
}
