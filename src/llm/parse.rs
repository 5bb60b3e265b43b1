//! Tolerant parsing of model output: JSON wrapped in prose or code fences, and yes/no
//! verdicts in their many spellings.

use serde::de::DeserializeOwned;

use crate::net::RemoteError;

/// The first JSON object or array in `text` that deserialises as `T`.
pub fn json_in<T: DeserializeOwned>(text: &str) -> Result<T, RemoteError> {
    if let Ok(v) = serde_json::from_str(text.trim()) {
        return Ok(v);
    }
    for (start, open) in text.char_indices().filter(|(_, c)| *c == '{' || *c == '[') {
        let close = if open == '{' { '}' } else { ']' };
        for (end, _) in text[start..].char_indices().filter(|(_, c)| *c == close) {
            if let Ok(v) = serde_json::from_str(&text[start..=start + end]) {
                return Ok(v);
            }
        }
    }
    Err(RemoteError::Malformed(format!("no JSON found in: {}", truncate(text, 200))))
}

/// A yes/no verdict: a JSON `verdict` field, or the first yes/no-like word.
pub fn verdict(text: &str) -> Result<bool, RemoteError> {
    #[derive(serde::Deserialize)]
    struct V {
        verdict: serde_json::Value,
    }
    if let Ok(V { verdict }) = json_in::<V>(text) {
        match verdict {
            serde_json::Value::Bool(b) => return Ok(b),
            serde_json::Value::String(s) => {
                if let Some(b) = yes_no_word(&s) {
                    return Ok(b);
                }
            }
            _ => {}
        }
    }
    text.split(|c: char| !c.is_alphabetic())
        .find_map(yes_no_word)
        .ok_or_else(|| RemoteError::Malformed(format!("no yes/no verdict in: {}", truncate(text, 200))))
}

fn yes_no_word(word: &str) -> Option<bool> {
    match word.trim().to_lowercase().as_str() {
        "yes" | "true" | "supported" | "relevant" | "adequate" | "correct" | "pass" | "sufficient" => Some(true),
        "no" | "false" | "unsupported" | "irrelevant" | "inadequate" | "incorrect" | "fail" | "insufficient" => Some(false),
        _ => None,
    }
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_inside_prose_and_fences() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct A {
            answer: String,
        }
        let a: A = json_in("Sure! ```json\n{\"answer\": \"Paris\"}\n``` hope that helps {").unwrap();
        assert_eq!(a.answer, "Paris");
        assert!(json_in::<A>("no json here").is_err());
    }

    #[test]
    fn verdict_variants() {
        assert!(verdict("{\"verdict\": \"Yes\", \"reason\": \"x\"}").unwrap());
        assert!(!verdict("{\"verdict\": false}").unwrap());
        assert!(verdict("YES, the evidence supports it.").unwrap());
        assert!(!verdict("Verdict: No.").unwrap());
        assert!(verdict("maybe").is_err());
    }
}
