//! Headings out of Markdown-shaped text (what every format reader produces): the title (the
//! first heading of either style) and each chunk's section path, with markup stripped.

use crate::kb::model::{Link, SECTION_SEPARATOR};

/// One heading: where its line starts, its level (setext `===` is 1, `---` 2) and its text.
#[derive(Debug, Clone, PartialEq)]
struct Heading {
    offset: usize,
    level: usize,
    text: String,
}

/// Every heading of `content`, in order: ATX lines (`# T` to `###### T`) and setext ones (a
/// line underlined with `===` or `---`). Lines in fenced code blocks are no headings; a
/// heading with nothing left after stripping ([`plain`]; a line of badges alone) is skipped.
fn headings(content: &str) -> Vec<Heading> {
    let mut lines = Vec::new();
    let mut offset = 0;
    for line in content.split_inclusive('\n') {
        lines.push((offset, line.trim()));
        offset += line.len();
    }
    let mut found = Vec::new();
    let mut fenced = false;
    for (i, &(offset, trimmed)) in lines.iter().enumerate() {
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let atx_heading = atx(trimmed).map(|text| (trimmed.chars().take_while(|c| *c == '#').count(), text));
        let heading = atx_heading.or_else(|| {
            let next = lines.get(i + 1)?.1;
            let level = match next.chars().next()? {
                '=' => 1,
                '-' => 2,
                _ => return None,
            };
            let underlined = next.len() >= 2 && next.chars().all(|c| c == next.as_bytes()[0] as char);
            (underlined && !trimmed.is_empty() && !trimmed.starts_with(['-', '*', '>', '|', '#']))
                .then_some((level, trimmed))
        });
        if let Some((level, text)) = heading {
            let text = plain(text);
            if !text.is_empty() {
                found.push(Heading { offset, level, text });
            }
        }
    }
    found
}

/// The first heading's text.
pub fn title(content: &str) -> Option<String> {
    headings(content).into_iter().next().map(|h| h.text)
}

/// For each chunk start (byte offsets, ascending), the headings it sits under, outermost
/// first, joined by [`SECTION_SEPARATOR`] ("Ownership › On call"). The document's own title
/// heading is left out (one that repeats `title`, or the text's first line: a page titled
/// `README` whose text opens with `# Courier` is about Courier throughout), and text before
/// any heading has none ("").
pub fn section_paths(content: &str, title: &str, starts: &[usize]) -> Vec<String> {
    let all = headings(content);
    let first_line = content.len() - content.trim_start().len();
    let title_heading =
        |h: &Heading| h.text.eq_ignore_ascii_case(title.trim()) || (h.offset == first_line && h.level == 1);
    let mut next = all.iter().peekable();
    let mut open: Vec<&Heading> = Vec::new();
    starts
        .iter()
        .map(|&start| {
            while let Some(heading) = next.next_if(|h| h.offset <= start) {
                while open.last().is_some_and(|o| o.level >= heading.level) {
                    open.pop();
                }
                open.push(heading);
            }
            let skip = usize::from(open.first().is_some_and(|h| title_heading(h)));
            open.iter().skip(skip).map(|h| h.text.as_str()).collect::<Vec<_>>().join(SECTION_SEPARATOR)
        })
        .collect()
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

/// `text` with each inline link `[anchor](target)` written as its anchor alone, and the
/// links, anchors as byte ranges of the text returned. Images and reference links stay as
/// written; a link's title (`[a](b "title")`) and angle brackets are no part of its target.
pub fn unlink(text: &str) -> (String, Vec<Link>) {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut links = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let image = i > 0 && chars[i - 1] == '!';
        let inline = (chars[i] == '[' && !image)
            .then(|| link_end(&chars, i))
            .flatten()
            .filter(|(close, after)| chars.get(close + 1) == Some(&'(') && *after > close + 2);
        match inline {
            Some((close, after)) => {
                let anchor: String = chars[i + 1..close].iter().collect();
                let target: String = chars[close + 2..after - 1].iter().collect();
                let target = target.split_whitespace().next().unwrap_or("").trim_matches(['<', '>']);
                let start = out.len();
                out.push_str(&anchor);
                if !target.is_empty() && !anchor.trim().is_empty() {
                    links.push(Link { anchor: (start, out.len()), target: target.to_string() });
                }
                i = after;
            }
            None => {
                out.push(chars[i]);
                i += 1;
            }
        }
    }
    (out, links)
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
    fn links_become_their_anchor_and_are_kept_aside() {
        let (text, links) =
            unlink("See [the cache](beacon.md \"Beacon\") and ![badge](b.svg), [ref][1], [web](<https://x.org/a b>).");
        assert_eq!(text, "See the cache and ![badge](b.svg), [ref][1], web.");
        let anchors: Vec<(&str, &str)> =
            links.iter().map(|l| (&text[l.anchor.0..l.anchor.1], l.target.as_str())).collect();
        assert_eq!(anchors, [("the cache", "beacon.md"), ("web", "https://x.org/a")]);
        assert_eq!(unlink("no links, [brackets] and (parens)").0, "no links, [brackets] and (parens)");
    }

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
    fn each_chunk_gets_the_headings_it_sits_under() {
        let text = "# Billing Service\n\nIntro.\n\n## Ownership\n\nTeam Ledger.\n\n### On call\n\nPager.\n\n## Deployment\n\nWeekly.\n";
        let at = |needle: &str| text.find(needle).unwrap();
        let starts = [0, at("Intro"), at("## Ownership"), at("Team"), at("Pager"), at("Weekly")];
        let paths = section_paths(text, "Billing Service", &starts);
        assert_eq!(paths, ["", "", "Ownership", "Ownership", "Ownership › On call", "Deployment"]);
        // A level-1 heading opening the text is the title whatever the document is called;
        // setext headings count.
        let setext = "Guide\n=====\n\nStart.\n\nSetup\n-----\n\nRun it.\n";
        let paths = section_paths(setext, "README", &[setext.find("Start").unwrap(), setext.find("Run").unwrap()]);
        assert_eq!(paths, ["", "Setup"]);
        // One further down is a section like any other.
        let later = "Intro line.\n\n# Guide\n\nRun it.\n";
        assert_eq!(section_paths(later, "README", &[0, later.find("Run").unwrap()]), ["", "Guide"]);
        assert_eq!(section_paths("no headings at all", "T", &[0, 5]), ["", ""]);
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
