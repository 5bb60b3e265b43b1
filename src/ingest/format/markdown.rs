//! Titles out of Markdown: the first heading of either style, with its markup stripped.

/// The first heading: an ATX line (`# T` to `###### T`) or a setext one (a line underlined
/// with `===` or `---`), whichever comes first, stripped of markup ([`plain`]). Lines in
/// fenced code blocks are no headings; a heading with nothing left after stripping (a line
/// of badges alone) is skipped.
pub fn title(content: &str) -> Option<String> {
    let lines: Vec<&str> = content.lines().collect();
    let mut fenced = false;
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let candidate = atx(trimmed).or_else(|| {
            let next = lines.get(i + 1)?.trim();
            let underlined = next.len() >= 2 && (next.chars().all(|c| c == '=') || next.chars().all(|c| c == '-'));
            (underlined && !trimmed.is_empty() && !trimmed.starts_with(['-', '*', '>', '|'])).then_some(trimmed)
        });
        if let Some(text) = candidate.map(plain).filter(|t| !t.is_empty()) {
            return Some(text);
        }
    }
    None
}

/// The text of an ATX heading line: one to six `#`, a space, the text, optional closing `#`s.
fn atx(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some(rest.trim().trim_end_matches('#').trim_end())
}

/// A heading's words without its markup: images (badges) dropped, links and emphasis
/// reduced to their text, inline HTML tags and code ticks removed, whitespace collapsed.
pub fn plain(heading: &str) -> String {
    let mut out = String::with_capacity(heading.len());
    let chars: Vec<char> = heading.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '!' if chars.get(i + 1) == Some(&'[') => {
                // An image, `![alt](url)`, often a link around it: nothing of it is a title.
                i = link_end(&chars, i + 1).map_or(i + 1, |(_, after)| after);
            }
            '[' => match link_end(&chars, i) {
                Some((text_end, after)) => {
                    out.push_str(&plain(&chars[i + 1..text_end].iter().collect::<String>()));
                    i = after;
                }
                None => {
                    out.push('[');
                    i += 1;
                }
            },
            '<' => match chars[i..].iter().position(|c| *c == '>') {
                Some(close) => i += close + 1,
                None => {
                    out.push('<');
                    i += 1;
                }
            },
            '*' | '_' | '`' => i += 1,
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// For `[text](target)` or `[text][ref]` starting at `open`: where the text ends and where
/// the whole link does.
fn link_end(chars: &[char], open: usize) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut close = None;
    for (j, c) in chars.iter().enumerate().skip(open) {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(j);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    let closer = match chars.get(close + 1) {
        Some('(') => ')',
        Some('[') => ']',
        _ => return Some((close, close + 1)),
    };
    let end = chars[close + 2..].iter().position(|c| *c == closer)? + close + 2;
    Some((close, end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_heading_of_either_style_titles_the_text() {
        assert_eq!(title("intro line\n\n## Ownership\n\n# Later").as_deref(), Some("Ownership"));
        assert_eq!(title("Quarry Tools\n============\n\nText.").as_deref(), Some("Quarry Tools"));
        assert_eq!(title("Release notes\n---\n\n# Not first").as_deref(), Some("Release notes"));
        assert_eq!(title("```\n# a comment in code\n```\n# Real").as_deref(), Some("Real"));
        assert_eq!(title("#hashtag\n\nno heading here"), None);
        // A rule under a list item or a blank line is no setext underline.
        assert_eq!(title("- item\n---\n\ntext"), None);
        assert_eq!(title("## Closed ##").as_deref(), Some("Closed"));
    }

    #[test]
    fn markup_is_stripped_from_titles() {
        assert_eq!(
            plain("Quarry ![Build Status](https://ci.example/badge.svg) [![docs](https://img/x.svg)](https://docs)"),
            "Quarry"
        );
        assert_eq!(plain("The [Harbour](https://example.org/h) *service* `v2`"), "The Harbour service v2");
        assert_eq!(plain("<img src=\"logo.png\"> Lantern <sup>beta</sup>"), "Lantern beta");
        assert_eq!(plain("a [dangling bracket"), "a [dangling bracket");
        // A heading of badges alone leaves nothing, and the next heading titles the text.
        assert_eq!(title("# ![ci](https://ci/b.svg)\n\n## Usage").as_deref(), Some("Usage"));
    }
}
