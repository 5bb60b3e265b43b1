//! Files as a team has them: PDF, HTML, DOCX, Markdown (ATX and setext) and text in one
//! directory, every file made here, ingested by the real binary; titles come from the files,
//! a broken PDF is reported by its path and everything else is ingested.

use std::path::Path;
use std::process::{Command, Output};

use docx_rust::Docx;
use docx_rust::document::Paragraph;
use docx_rust::formatting::ParagraphProperty;

const BIN: &str = env!("CARGO_BIN_EXE_a2rag");

fn a2rag(data: &Path, args: &[&str]) -> Output {
    a2rag_with(data, args, &[])
}

fn a2rag_with(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BIN).arg("--data-dir").arg(data).args(args).envs(env.iter().copied()).output().unwrap()
}

/// A PDF with one page per entry of `pages` (lines of text; an empty page has no text
/// layer) and, where given, a `Title` in its information dictionary.
fn pdf(title: Option<&str>, pages: &[&[&str]]) -> Vec<u8> {
    let mut objects: Vec<String> = Vec::new();
    // 1: catalog, 2: page tree, 3: font, then a page and its content per page, then the info.
    let first_page = 4;
    let kids: Vec<String> = (0..pages.len()).map(|i| format!("{} 0 R", first_page + 2 * i)).collect();
    objects.push("<< /Type /Catalog /Pages 2 0 R >>".into());
    objects.push(format!("<< /Type /Pages /Kids [{}] /Count {} >>", kids.join(" "), pages.len()));
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into());
    for (i, lines) in pages.iter().enumerate() {
        let content_id = first_page + 2 * i + 1;
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {content_id} 0 R >>"
        ));
        let mut stream = String::new();
        if !lines.is_empty() {
            stream.push_str("BT /F1 12 Tf 72 720 Td 16 TL\n");
            for line in lines.iter() {
                stream.push_str(&format!("({line}) Tj T*\n"));
            }
            stream.push_str("ET\n");
        }
        objects.push(format!("<< /Length {} >>\nstream\n{stream}endstream", stream.len()));
    }
    let info_id = objects.len() + 1;
    objects.push(format!("<< /Title ({}) >>", title.unwrap_or("")));
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n{body}\nendobj\n", i + 1).bytes());
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).bytes());
    for offset in offsets {
        out.extend(format!("{offset:010} 00000 n \n").bytes());
    }
    let info = if title.is_some() { format!(" /Info {info_id} 0 R") } else { String::new() };
    out.extend(
        format!("trailer\n<< /Size {} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).bytes(),
    );
    out
}

fn docx(path: &Path) {
    let heading = |style: &'static str, text: &'static str| {
        Paragraph::default().property(ParagraphProperty::default().style_id(style)).push_text(text)
    };
    let mut doc = Docx::default();
    doc.document.push(heading("Heading1", "Harbour specification"));
    doc.document.push(Paragraph::default().push_text("Harbour stores shipping manifests for the Quarry team."));
    doc.document.push(heading("Heading2", "Retention"));
    doc.document.push(Paragraph::default().push_text("Manifests are kept for nineteen months."));
    doc.write_file(path).unwrap();
}

#[test]
fn every_format_ingests_with_its_own_title_and_a_broken_pdf_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(
        docs.join("guide.md"),
        "Quarry handbook\n===============\n\nThe Quarry team runs the ore conveyors.\n\nNight shift\n-----------\n\n\
         The belts run until dawn.\n\n### Safety\n\nStop the belts before clearing a jam.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("README.md"),
        "# Lantern ![Build Status](https://ci.example/badge.svg)\n\nLantern is the lighthouse scheduler.\n",
    )
    .unwrap();
    std::fs::write(docs.join("notes.txt"), "Plain notes about the tide tables of Marrow Bay.\n").unwrap();
    std::fs::write(
        docs.join("relay.html"),
        "<html><head><title>Relay | Wiki</title><script>var x = 'hidden';</script></head><body>\
         <nav><a href='/'>Home</a></nav><h1>Relay bus</h1><p>Relay carries <a href='lantern.html'>Lantern</a> \
         events between the piers.</p><h2>Routing</h2><p>Events for the north pier go first.</p></body></html>",
    )
    .unwrap();
    docx(&docs.join("harbour.docx"));
    std::fs::write(
        docs.join("report.pdf"),
        pdf(Some("Tidewater report"), &[&["The Tidewater survey counted four hundred herons.", "Second line."], &[]]),
    )
    .unwrap();
    std::fs::write(docs.join("untitled.pdf"), pdf(None, &[&["Kelp harvest ledger", "Rows of kelp were cut in May."]]))
        .unwrap();
    std::fs::write(docs.join("broken.pdf"), b"%PDF-1.4\n1 0 obj << /Type /Catalog broken").unwrap();
    std::fs::write(docs.join("scan.pdf"), pdf(Some("Scanned"), &[&[]])).unwrap();

    let data = dir.path().join("data");
    // Chunks of a few words, so that the short files here have chunks under their subheadings.
    let ingest = a2rag_with(
        &data,
        &["ingest", docs.to_str().unwrap()],
        &[("A2RAG__INGEST__CHUNK_TOKENS", "12"), ("A2RAG__INGEST__CHUNK_OVERLAP", "0")],
    );
    let stderr = String::from_utf8_lossy(&ingest.stderr);
    let stdout = String::from_utf8_lossy(&ingest.stdout);
    let said = format!("{stdout}{stderr}");
    assert!(said.contains("broken.pdf") && said.contains("not a readable PDF"), "{said}");
    assert!(said.contains("scan.pdf") && said.contains("no page has a text layer"), "{said}");
    assert!(said.contains("report.pdf") && said.contains("page 2 has no text layer"), "{said}");

    let listed = a2rag(&data, &["docs", "--json"]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let mut titles: Vec<String> = listed
        .as_array()
        .expect("a list of documents")
        .iter()
        .map(|d| d["title"].as_str().unwrap().to_string())
        .collect();
    titles.sort();
    assert_eq!(
        titles,
        [
            "Harbour specification",
            "Kelp harvest ledger",
            "Lantern",
            "Quarry handbook",
            "Relay bus",
            "Tidewater report",
            "notes"
        ],
        "{listed}"
    );

    // Each chunk carries the heading path it starts under, below the title.
    let sections = |file: &str| {
        let doc = listed.as_array().unwrap().iter().find(|d| d["id"].as_str().unwrap().ends_with(file)).unwrap();
        doc["sections"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(sections("guide.md"), ["Night shift", "Night shift › Safety"], "ATX under setext");
    assert_eq!(sections("harbour.docx"), ["Retention"], "Word's heading styles");
    assert_eq!(sections("relay.html"), ["Routing"], "HTML headings");
    assert!(sections("notes.txt").is_empty() && sections("report.pdf").is_empty());
    let found = a2rag(&data, &["retrieve", "--json", "When do the Quarry belts stop for a jam?"]);
    let found: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
    assert_eq!(found["retrieval"]["chunks"][0]["section"], "Night shift › Safety", "{found}");

    // The text layers were read: each format's own words find it.
    for (query, file) in [
        ("How long are Harbour manifests kept?", "harbour.docx"),
        ("How many herons did the Tidewater survey count?", "report.pdf"),
        ("What does Relay carry between the piers?", "relay.html"),
    ] {
        let found = a2rag(&data, &["retrieve", "--json", query]);
        let found: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
        let first = found["retrieval"]["chunks"][0].to_string();
        assert!(first.contains(file), "{query}: {first}");
    }
    let found = a2rag(&data, &["retrieve", "--json", "hidden Home"]);
    assert!(!String::from_utf8_lossy(&found.stdout).contains("var x"), "scripts are no text");
}
