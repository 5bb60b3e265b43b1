//! HTML: the main text, headings as `#` lines, the title from the first `<h1>` (else
//! `<title>`). Scripts, styles, navigation and page furniture are left out; a link keeps its
//! anchor text in place, which is where the lead step finds the names of other pages, and
//! its target, which is what it follows (see `markdown::unlink`).

use scraper::{ElementRef, Html, Node, Selector};

use super::{Extracted, heading, markdown, tidy};

/// Elements whose content is not the document's text.
const LEFT_OUT: &[&str] =
    &["script", "style", "noscript", "template", "nav", "footer", "svg", "head", "form", "button"];

/// Elements that end a line of text before and after them.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "aside",
    "li",
    "ul",
    "ol",
    "table",
    "tr",
    "td",
    "th",
    "blockquote",
    "pre",
    "dd",
    "dt",
    "dl",
    "figure",
    "figcaption",
    "br",
    "hr",
];

pub fn extract(content: &str) -> Extracted {
    let document = Html::parse_document(content);
    let mut lines = vec![String::new()];
    walk(document.root_element(), &mut lines);
    let title = first_text(&document, "h1").or_else(|| first_text(&document, "title"));
    let (text, links) = markdown::unlink(&tidy(lines));
    Extracted { title, text, links, gaps: Vec::new() }
}

fn first_text(document: &Html, tag: &str) -> Option<String> {
    let selector = Selector::parse(tag).ok()?;
    document.select(&selector).map(|e| words(&e)).find(|t| !t.is_empty())
}

fn words(element: &ElementRef<'_>) -> String {
    element.text().collect::<Vec<_>>().join(" ").split_whitespace().collect::<Vec<_>>().join(" ")
}

fn walk(element: ElementRef<'_>, lines: &mut Vec<String>) {
    for child in element.children() {
        match child.value() {
            Node::Text(text) => push(lines, text),
            Node::Element(e) => {
                let Some(child) = ElementRef::wrap(child) else { continue };
                let name = e.name();
                if LEFT_OUT.contains(&name) {
                    continue;
                }
                if let Some(level) = heading_level(name) {
                    lines.push(heading(level, &words(&child)));
                    lines.push(String::new());
                } else if BLOCKS.contains(&name) {
                    lines.push(String::new());
                    walk(child, lines);
                    lines.push(String::new());
                } else if let Some(href) = e.attr("href").filter(|_| name == "a") {
                    // A link is kept as one, in the Markdown shape every reader gives, for
                    // `markdown::unlink` to read: its anchor in the text, its target aside.
                    push(lines, "[");
                    walk(child, lines);
                    push(lines, &format!("]({})", href.split_whitespace().collect::<Vec<_>>().join("%20")));
                } else {
                    // Inline (emphasis, a span): its words run on in the line, as a browser
                    // shows them ("H<sub>2</sub>O" is one word).
                    walk(child, lines);
                }
            }
            _ => {}
        }
    }
}

fn push(lines: &mut [String], text: &str) {
    if let Some(line) = lines.last_mut() {
        line.push_str(text);
    }
}

fn heading_level(name: &str) -> Option<usize> {
    let digit = name.strip_prefix('h')?;
    let level: usize = digit.parse().ok()?;
    (1..=6).contains(&level).then_some(level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_text_with_headings_and_anchor_text_and_no_furniture() {
        let page = r#"<!doctype html><html><head><title>Tab title</title><style>p{color:red}</style></head>
            <body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
            <h1>Lantern  service</h1>
            <p>Lantern sends <a href="/relay.html">Relay</a> events to <b>two</b> queues.</p>
            <h2>Ownership</h2><ul><li>Owned by the Harbour team.</li><li>On call weekly.</li></ul>
            <script>var secret = 1;</script><footer>Copyright</footer></body></html>"#;
        let got = extract(page);
        assert_eq!(got.title.as_deref(), Some("Lantern service"));
        assert_eq!(
            got.text,
            "# Lantern service\n\nLantern sends Relay events to two queues.\n\n## Ownership\n\n\
             Owned by the Harbour team.\n\nOn call weekly."
        );
        // The link is kept as one: its anchor in the text, its target aside.
        let anchors: Vec<(&str, &str)> =
            got.links.iter().map(|l| (&got.text[l.anchor.0..l.anchor.1], l.target.as_str())).collect();
        assert_eq!(anchors, [("Relay", "/relay.html")]);
    }

    #[test]
    fn without_a_heading_the_title_element_titles_the_page() {
        let got = extract("<html><head><title> Quarry notes </title></head><body><p>Text.</p></body></html>");
        assert_eq!(got.title.as_deref(), Some("Quarry notes"));
        assert_eq!(got.text, "Text.");
        assert_eq!(extract("<p>Just text</p>").title, None);
    }
}
