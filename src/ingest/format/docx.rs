//! DOCX: paragraphs in order, a `Heading N` (or `Title`) style as a heading line, table cells
//! as lines; the title from the document's properties, else its first heading.

use std::io::Cursor;
use std::path::Path;

use docx_rust::DocxFile;
use docx_rust::document::{BodyContent, Paragraph, TableCellContent, TableRowContent};

use super::{Extracted, heading, tidy, unreadable};
use crate::error::Error;

pub fn extract(bytes: &[u8], path: &Path) -> Result<Extracted, Error> {
    let file =
        DocxFile::from_reader(Cursor::new(bytes)).map_err(|e| unreadable(path, "DOCX file", format!("{e:?}")))?;
    let docx = file.parse().map_err(|e| unreadable(path, "DOCX file", format!("{e:?}")))?;
    let mut lines = Vec::new();
    let mut first_heading = None;
    for content in &docx.document.body.content {
        match content {
            BodyContent::Paragraph(p) => {
                let line = paragraph_line(p);
                if first_heading.is_none() && line.starts_with('#') {
                    first_heading = Some(line.trim_start_matches('#').trim().to_string());
                }
                lines.push(line);
            }
            BodyContent::Table(table) => {
                for row in &table.rows {
                    for cell in &row.cells {
                        let TableRowContent::TableCell(cell) = cell else { continue };
                        for TableCellContent::Paragraph(p) in &cell.content {
                            lines.push(p.text());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let core_title = docx.core.as_ref().and_then(|core| match core {
        docx_rust::core::Core::CoreNamespace(c) => c.title.as_deref().map(str::to_string),
        docx_rust::core::Core::CoreNoNamespace(c) => c.title.as_deref().map(str::to_string),
    });
    let title = core_title.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).or(first_heading);
    Ok(Extracted { title, text: tidy(lines), links: Vec::new(), gaps: Vec::new() })
}

/// The paragraph's text, as a heading line where its style is a heading's.
fn paragraph_line(p: &Paragraph<'_>) -> String {
    let text = p.text();
    let style = p.property.as_ref().and_then(|prop| prop.style_id.as_ref()).map(|s| s.value.to_string());
    match style.as_deref().and_then(heading_level) {
        Some(level) if !text.trim().is_empty() => heading(level, &text),
        _ => text,
    }
}

/// `Title` is a first-level heading, `Heading1`..`Heading6` (Word's style ids, also with a
/// space) their level.
fn heading_level(style: &str) -> Option<usize> {
    if style.eq_ignore_ascii_case("title") {
        return Some(1);
    }
    let digits = style.strip_prefix("Heading").or_else(|| style.strip_prefix("heading"))?.trim();
    digits.parse().ok().filter(|level| (1..=6).contains(level))
}
