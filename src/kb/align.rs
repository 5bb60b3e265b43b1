//! The hybrid matcher: decides whether two mentions name the same entity, and how well a
//! query phrase aligns with a node. Edit similarity (strsim) and embedding cosine must agree,
//! except for the acronym rule, which neither measure sees ("CFH" vs "CFH Clearing").

use crate::config::AliasSettings;
use crate::text::normalize_entity;

pub struct Mention<'a> {
    pub surface: &'a str,
    /// `normalize_entity(surface)`.
    pub key: &'a str,
}

/// Blocking keys of a mention: the 4-character prefix of each content word of its key, and
/// its capital initials. Two mentions can only be merged when they share a key, which makes
/// candidate generation exact and deterministic (unlike an approximate vector search).
pub fn blocking_keys(surface: &str) -> Vec<String> {
    let key = normalize_entity(surface);
    let mut keys: Vec<String> = key
        .split_whitespace()
        .filter(|w| !crate::text::is_stopword(w))
        .map(|w| format!("w:{}", w.chars().take(4).collect::<String>()))
        .collect();
    let initials: String =
        surface.split_whitespace().filter_map(|w| w.chars().next()).filter(|c| c.is_uppercase()).collect();
    if initials.len() >= 2 {
        keys.push(format!("i:{initials}"));
    }
    let letters: String = surface.chars().filter(|c| c.is_alphanumeric()).collect();
    if (2..=6).contains(&letters.len()) && letters.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
        keys.push(format!("i:{letters}"));
    }
    keys.sort();
    keys.dedup();
    keys
}

pub fn edit_similarity(a_key: &str, b_key: &str) -> f32 {
    strsim::normalized_levenshtein(a_key, b_key) as f32
}

/// `edit_similarity(a, b) >= threshold`, without running Levenshtein when the lengths alone
/// rule it out: the distance is at least the difference in length. Alias matching compares a
/// new mention with every node sharing a blocking key, most of them far apart in length.
fn edit_similarity_at_least(a_key: &str, b_key: &str, threshold: f32) -> bool {
    let (la, lb) = (a_key.chars().count(), b_key.chars().count());
    let longest = la.max(lb);
    // The margin keeps float rounding from ever rejecting a pair Levenshtein would accept.
    if longest > 0 && 1.0 - (la.abs_diff(lb) as f64 / longest as f64) < threshold as f64 - 1e-6 {
        return false;
    }
    edit_similarity(a_key, b_key) >= threshold
}

/// Both measures above their thresholds, or the acronym rule. `cosine` gives the embedding
/// similarity of the pair (`None`: no vector); it is only called when the names are close
/// enough for it to matter, so callers may fetch vectors lazily.
pub fn same_entity(
    a: &Mention<'_>,
    b: &Mention<'_>,
    cosine: impl FnOnce() -> Option<f32>,
    settings: &AliasSettings,
) -> bool {
    if a.key == b.key {
        return true;
    }
    let confident = edit_similarity_at_least(a.key, b.key, settings.edit_threshold)
        && cosine().is_some_and(|c| c >= settings.cosine_threshold);
    confident || acronym_of(a.surface, b.surface) || acronym_of(b.surface, a.surface)
}

/// `short` is an all-caps acronym (2-6 letters, tags stripped) that either heads `long`
/// ("CFH" / "CFH Clearing") or spells the initials of its capitalised words
/// ("AIP" / "American Institute of Physics").
pub fn acronym_of(short: &str, long: &str) -> bool {
    let letters: String = short
        .split(['[', ']'])
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s)
        .collect::<String>()
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect();
    let is_acronym = (2..=6).contains(&letters.len())
        && letters.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && letters.chars().any(|c| c.is_ascii_uppercase());
    if !is_acronym {
        return false;
    }
    let short_key = normalize_entity(short);
    let long_key = normalize_entity(long);
    if long_key == short_key {
        return false;
    }
    if long_key.starts_with(&format!("{short_key} ")) {
        return true;
    }
    let initials: String =
        long.split_whitespace().filter_map(|w| w.chars().next()).filter(|c| c.is_uppercase()).collect();
    initials.len() >= 2 && initials == letters
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::embed::{Embedder, HashEmbedder, cosine};

    fn mention<'a>(surface: &'a str, key: &'a str) -> Mention<'a> {
        Mention { surface, key }
    }

    #[test]
    fn length_bound_agrees_with_levenshtein() {
        let words = [
            "abcdefghijklmnopqrstuvwxy",
            "abcdefghijklmnopqrstuv",
            "paris",
            "parish",
            "paris hilton",
            "",
            "p",
            "colour research",
            "color research",
            "münchen",
            "munchen",
        ];
        for a in words {
            for b in words {
                for threshold in [0.5, 0.88, 0.95, edit_similarity(a, b)] {
                    assert_eq!(
                        edit_similarity_at_least(a, b, threshold),
                        edit_similarity(a, b) >= threshold,
                        "{a:?} {b:?} {threshold}"
                    );
                }
            }
        }
    }

    #[test]
    fn merges_tag_variants_and_acronyms_but_not_relatives() {
        let s = Settings::defaults().alias;
        let e = HashEmbedder::new(512);
        let pairs = [
            ("CFH", "CFH Clearing", true),
            ("[GUI] CFH", "CFH", true),
            ("[GUI] CFH", "CFH Clearing", true),
            ("AIP", "American Institute of Physics", true),
            ("Colour Research", "Color Research", true),
            ("Barack Obama", "Barack Obama Sr.", false),
            ("Paris", "Paris Hilton", false),
            ("John Smith", "Jane Smith", false),
        ];
        for (a, b, expected) in pairs {
            let (ka, kb) = (normalize_entity(a), normalize_entity(b));
            let (va, vb) = (e.embed_one(a).unwrap(), e.embed_one(b).unwrap());
            assert_eq!(
                same_entity(&mention(a, &ka), &mention(b, &kb), || Some(cosine(&va, &vb)), &s),
                expected,
                "{a} vs {b}"
            );
        }
    }
}
