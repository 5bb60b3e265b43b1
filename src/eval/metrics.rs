//! Retrieval and answer metrics, with the conventions of the papers we compare to.

use std::collections::HashSet;

use crate::text::normalize_answer;

/// |gold in top k| / |gold|; a question without gold passages counts as 0.
pub fn recall_at(ranked: &[String], gold: &[String], k: usize) -> f64 {
    if gold.is_empty() {
        return 0.0;
    }
    let top: HashSet<&String> = ranked.iter().take(k).collect();
    gold.iter().filter(|g| top.contains(g)).count() as f64 / gold.len() as f64
}

pub fn exact_match(prediction: &str, truth: &str) -> f64 {
    f64::from(u8::from(normalize_answer(prediction) == normalize_answer(truth)))
}

/// SQuAD token F1.
pub fn f1(prediction: &str, truth: &str) -> f64 {
    let p = normalize_answer(prediction);
    let t = normalize_answer(truth);
    let p: Vec<&str> = p.split_whitespace().collect();
    let t: Vec<&str> = t.split_whitespace().collect();
    if p.is_empty() || t.is_empty() {
        return f64::from(u8::from(p == t));
    }
    let mut remaining = t.clone();
    let mut common = 0;
    for w in &p {
        if let Some(i) = remaining.iter().position(|x| x == w) {
            remaining.swap_remove(i);
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / p.len() as f64;
    let recall = common as f64 / t.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() { 0.0 } else { xs.iter().sum::<f64>() / xs.len() as f64 }
}

/// Nearest-rank percentile.
pub fn percentile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_em_f1_percentile() {
        let ranked: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let gold: Vec<String> = ["c", "d"].iter().map(|s| s.to_string()).collect();
        assert_eq!(recall_at(&ranked, &gold, 2), 0.0);
        assert_eq!(recall_at(&ranked, &gold, 5), 0.5);
        assert_eq!(exact_match("The Beatles", "beatles"), 1.0);
        assert!((f1("new york city", "new york") - 0.8).abs() < 1e-9);
        assert_eq!(percentile(&[5.0, 1.0, 3.0, 2.0, 4.0], 0.5), 3.0);
        assert_eq!(percentile(&[1.0, 2.0], 0.95), 2.0);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&hundred, 0.5), 50.0);
        assert_eq!(percentile(&hundred, 0.95), 95.0);
        assert_eq!(percentile(&hundred, 1.0), 100.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
