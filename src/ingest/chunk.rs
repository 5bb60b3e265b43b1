//! Sentence-aware chunking: windows of whole sentences up to `chunk_tokens` words, the next
//! window starting early enough to repeat about `overlap` words. A sentence longer than a
//! window is cut on word boundaries.

use std::ops::Range;

use crate::text;

/// Byte spans of the chunks of `text`, in order. Empty text gives no chunks.
pub fn chunk_spans(text: &str, chunk_tokens: usize, overlap: usize) -> Vec<Range<usize>> {
    let mut pieces: Vec<(Range<usize>, usize)> = Vec::new();
    for sentence in text::sentence_spans(text) {
        let words = word_spans(&text[sentence.clone()], sentence.start);
        if words.len() <= chunk_tokens {
            pieces.push((sentence, words.len()));
        } else {
            for window in words.chunks(chunk_tokens) {
                pieces.push((window[0].start..window[window.len() - 1].end, window.len()));
            }
        }
    }
    let mut chunks = Vec::new();
    let mut first = 0;
    while first < pieces.len() {
        let mut last = first;
        let mut tokens = pieces[first].1;
        while last + 1 < pieces.len() && tokens + pieces[last + 1].1 <= chunk_tokens {
            last += 1;
            tokens += pieces[last].1;
        }
        chunks.push(pieces[first].0.start..pieces[last].0.end);
        if last + 1 >= pieces.len() {
            break;
        }
        // Step back over trailing sentences worth about `overlap` words, but always advance.
        let mut next = last + 1;
        let mut carried = 0;
        while next - 1 > first && carried + pieces[next - 1].1 <= overlap {
            next -= 1;
            carried += pieces[next].1;
        }
        first = next;
    }
    chunks
}

fn word_spans(sentence: &str, offset: usize) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in sentence.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                spans.push(offset + s..offset + i);
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push(offset + s..offset + sentence.len());
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_passage_is_one_chunk() {
        let t = "One sentence here. Another one there.";
        assert_eq!(chunk_spans(t, 200, 40), vec![0..t.len()]);
    }

    #[test]
    fn windows_respect_size_overlap_and_cover_everything() {
        let t = "Aa bb cc. Dd ee ff. Gg hh ii. Jj kk ll. Mm nn oo.";
        let spans = chunk_spans(t, 6, 3);
        let texts: Vec<&str> = spans.iter().map(|r| &t[r.clone()]).collect();
        assert_eq!(
            texts,
            vec!["Aa bb cc. Dd ee ff.", "Dd ee ff. Gg hh ii.", "Gg hh ii. Jj kk ll.", "Jj kk ll. Mm nn oo."]
        );
    }

    #[test]
    fn overlong_sentence_is_cut_on_words() {
        let t = "a b c d e f g";
        let spans = chunk_spans(t, 3, 0);
        let texts: Vec<&str> = spans.iter().map(|r| &t[r.clone()]).collect();
        assert_eq!(texts, vec!["a b c", "d e f", "g"]);
        assert!(chunk_spans("   ", 3, 0).is_empty());
    }
}
