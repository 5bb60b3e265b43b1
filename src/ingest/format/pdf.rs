//! PDF: the text layer, page by page; the title from the document's metadata, else its first
//! line. A page without a text layer (a scan) is named as a gap; a file without any is an
//! error, since nothing of it can be searched.

use std::path::Path;

use super::{Extracted, tidy, unreadable};
use crate::error::Error;

pub fn extract(bytes: &[u8], path: &Path) -> Result<Extracted, Error> {
    // The PDF parser panics on some malformed files rather than returning an error; a bad
    // file must cost that file, not the ingest. The file is parsed once, for its pages and
    // its title.
    let (pages, title) = std::panic::catch_unwind(|| read(bytes))
        .map_err(|_| unreadable(path, "PDF", "the parser gave up on its structure"))?
        .map_err(|e| unreadable(path, "PDF", e))?;
    let mut gaps = Vec::new();
    let mut lines = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        if page.trim().is_empty() {
            gaps.push(format!("page {} has no text layer (a scanned image?); OCR it to make it searchable", i + 1));
        }
        lines.extend(page.lines().map(str::to_string));
        lines.push(String::new());
    }
    let text = tidy(lines);
    if text.is_empty() {
        return Err(Error::Invalid(format!(
            "{}: no page has a text layer ({} pages; a scanned document?); OCR it to make it searchable",
            path.display(),
            pages.len()
        )));
    }
    let title = title.or_else(|| text.lines().next().map(|l| l.trim().to_string()));
    Ok(Extracted { title, text, links: Vec::new(), gaps })
}

/// Each page's text, in page order, and the metadata title, from one parse of the file. An
/// encrypted file opens only without a password, as a viewer would open it.
fn read(bytes: &[u8]) -> Result<(Vec<String>, Option<String>), pdf_extract::OutputError> {
    let mut doc = pdf_extract::Document::load_mem(bytes)?;
    if doc.is_encrypted() {
        doc.decrypt("")?;
    }
    let mut pages = Vec::new();
    for page in doc.get_pages().into_keys() {
        let mut text = String::new();
        pdf_extract::output_doc_page(&doc, &mut pdf_extract::PlainTextOutput::new(&mut text), page)?;
        pages.push(text);
    }
    Ok((pages, metadata_title(&doc)))
}

/// The `Title` of the document information dictionary, where there is one.
fn metadata_title(doc: &pdf_extract::Document) -> Option<String> {
    let info = doc.trailer.get(b"Info").ok()?.as_reference().ok()?;
    let title = doc.get_dictionary(info).ok()?.get(b"Title").ok()?.as_str().ok()?;
    let title = decode_pdf_string(title);
    let title = title.trim();
    (!title.is_empty()).then(|| title.to_string())
}

/// A PDF text string: UTF-16BE with its byte-order mark, or PDFDocEncoding, which agrees
/// with Latin-1 on the characters a title uses.
fn decode_pdf_string(bytes: &[u8]) -> String {
    match bytes.strip_prefix(&[0xfe, 0xff]) {
        Some(utf16) => {
            let units: Vec<u16> = utf16.chunks_exact(2).map(|p| u16::from_be_bytes([p[0], p[1]])).collect();
            String::from_utf16_lossy(&units)
        }
        None => bytes.iter().map(|b| char::from(*b)).collect(),
    }
}
