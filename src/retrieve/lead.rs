//! The first two places of the final ranking: the lead passage and the page it leads to.
//!
//! A multi-hop question names what its first hop is about, so the passage most like the
//! question, the text list's best, leads. At rank 1 it is right far more often than the
//! graph's best (MuSiQue dev: 0.72-0.82 against 0.44-0.68; HotpotQA: 0.88-0.92 against
//! 0.34-0.58): PPR mass spreads over the passages of every seed, which is what finds the later
//! hops and what blurs the first.
//!
//! The next hop is about an entity the first names: the best-ranked passage whose topic (the
//! entity its title names, "Mira" for "Mira (ship)") the lead passage's text names
//! follows it. That is a hyperlink of an encyclopaedia, the anchor text naming the page, and
//! the bridge of a two-hop question ("the film shot in Kell in 1986" leads to the page of
//! "Low Tide"). It is read off titles and text rather than the extracted mentions
//! ([`Pages`]), so it holds whatever the extractor caught or lost ("Young, New
//! South Wales" is one name there, two entities to the rule extractor), and only a whole name
//! counts ("North Kell" does not name "Kell"). Among the fused ranking's first
//! `retrieve.link_candidates`, passages the question's evidence already favours, any mention
//! counts ("the euro"); further down only a mention written as a name does ("Iowa", not
//! "time" or "1984", which title pages too): there the link stands on the text alone, as when
//! the extraction lost the entity joining the two passages, and the walk with it. The rest
//! keeps the fused order. A hyperlink in the lead passage to another document of the KB (a
//! Markdown or HTML link between files of a folder) is that pointer written down: the linked
//! document's best-ranked passage qualifies at any rank of the fusion, where a name the text
//! only writes needs the first `link_candidates` or a capital.

use std::collections::HashMap;

use foldhash::HashSet;

use super::PathHop;
use crate::kb::Kb;
use crate::kb::model::{Chunk, ChunkId, DocKey};
use crate::kb::pages::Pages;
use crate::text;

/// Relation label of the hop from a passage to the page of an entity it mentions.
pub const MENTIONS: &str = "mentions";

/// The passages a fused ranking leaves out: it holds the head of each list it fuses (see
/// `RANKING_DEPTH`), and a hop may lead further down.
pub trait RankedBelow {
    /// Those of `wanted` (none of them in the fused ranking) that rank below it, in the
    /// order the full ranking would put them.
    fn ranked_below(&self, wanted: &HashSet<ChunkId>) -> Vec<ChunkId>;
}

/// A fused ranking that holds everything.
impl RankedBelow for () {
    fn ranked_below(&self, _: &HashSet<ChunkId>) -> Vec<ChunkId> {
        Vec::new()
    }
}

/// `fused` (best first) with `lead` moved to the top and, right after it, the best-ranked
/// passage of another document whose topic the lead passage names (any mention among the
/// first `candidates`, a capitalised one below, in `fused` or `below` it); both take the top
/// score, so scores stay in order. Returns the hop that led there too, for the retrieval's
/// paths, with the topic as the lead passage writes it.
pub fn lead_with_link(
    kb: &Kb,
    lead: Option<ChunkId>,
    fused: Vec<(ChunkId, f32)>,
    candidates: usize,
    below: &dyn RankedBelow,
) -> (Vec<(ChunkId, f32)>, Option<PathHop>) {
    let Some(lead_chunk) = lead.and_then(|c| kb.chunk(c)) else {
        return (fused, None);
    };
    let lead = lead_chunk.id;
    let top = fused.first().map_or(0.0, |(_, s)| *s);
    let named = kb.pages().named_in(&lead_chunk.text);
    let own_topic = Pages::topic_key(kb.chunk_title(lead_chunk));
    let hyperlinked = hyperlinked_docs(kb, lead_chunk);
    let link = if named.is_empty() && hyperlinked.is_empty() {
        None
    } else {
        // The passages that could be the hop, so that a long ranking (a walk over a large KB
        // reaches hundreds of thousands) is scanned by set lookups, not by reading each chunk.
        let hyperlinked_chunks: HashSet<ChunkId> =
            hyperlinked.keys().filter_map(|doc| kb.doc(*doc)).flat_map(|doc| doc.chunks.iter().copied()).collect();
        let hop_at = |rank: usize, chunk: &ChunkId| {
            if !hyperlinked_chunks.contains(chunk) && !named.contains_key(chunk) {
                return None;
            }
            let candidate = kb.chunk(*chunk).filter(|c| c.doc != lead_chunk.doc)?;
            // A hyperlink is the author's own pointer: it counts at any rank.
            if let Some(anchor) = hyperlinked.get(&candidate.doc) {
                return Some((*chunk, anchor.clone()));
            }
            // Another chunk of the lead's own document names its title too, but is no hop.
            let anchor = named.get(chunk)?;
            if rank < candidates {
                return Some((*chunk, lead_chunk.text[anchor.first.clone()].to_string()));
            }
            // Below the candidates the name is all the evidence, and a page of the lead's own
            // topic (another "Mira", a second paragraph of the same article) is named by
            // every passage about it.
            let written = anchor.capitalised.clone()?;
            (Pages::topic_key(kb.chunk_title(candidate)) != own_topic)
                .then(|| (*chunk, lead_chunk.text[written].to_string()))
        };
        fused.iter().enumerate().find_map(|(rank, (chunk, _))| hop_at(rank, chunk)).or_else(|| {
            let held: HashSet<ChunkId> = fused.iter().map(|(c, _)| *c).collect();
            let wanted: HashSet<ChunkId> =
                hyperlinked_chunks.iter().chain(named.keys()).filter(|c| !held.contains(c)).copied().collect();
            let rest = if wanted.is_empty() { Vec::new() } else { below.ranked_below(&wanted) };
            rest.iter().enumerate().find_map(|(offset, chunk)| hop_at(fused.len() + offset, chunk))
        })
    };
    let mut ranking = Vec::with_capacity(fused.len() + 1);
    ranking.push((lead, top));
    ranking.extend(link.as_ref().map(|(chunk, _)| (*chunk, top)));
    let linked = link.as_ref().map(|(chunk, _)| *chunk);
    ranking.extend(fused.into_iter().filter(|(c, _)| *c != lead && Some(*c) != linked));
    let hop = link.map(|(_, topic)| {
        let title = kb.chunk_title(lead_chunk);
        PathHop {
            subject: text::title_entity(title).unwrap_or_else(|| title.to_string()),
            relation: MENTIONS.into(),
            object: topic,
            chunk: lead,
        }
    });
    (ranking, hop)
}

/// The documents `chunk` links to, other than its own, each with the anchor text of its
/// first link there.
fn hyperlinked_docs(kb: &Kb, chunk: &Chunk) -> HashMap<DocKey, String> {
    let mut docs = HashMap::new();
    for (link, target) in kb.linked_docs(chunk) {
        let anchor = chunk.text.get(link.anchor.0..link.anchor.1).unwrap_or(target.title.as_str());
        docs.entry(target.key).or_insert_with(|| anchor.to_string());
    }
    docs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::testing::{chunk_of, kb_with_docs};

    /// A lead ("Kell") that names one page as a name ("Low Tide"), one as a common
    /// word ("film") and none of the others; the chunk ids in that order: kell, tide,
    /// moe, orwick, film.
    fn corpus() -> (tempfile::TempDir, Kb, [ChunkId; 5]) {
        let titles = ["Kell, Nordmark", "Low Tide", "Nils Moe", "Orwick, Nordmark", "Film"];
        let (dir, kb) = kb_with_docs(&[
            (titles[0], "Kell is a town in Nordmark. Low Tide was shot in Kell in 1986, a film year."),
            (titles[1], "Low Tide is a 1986 film written and directed by Nils Moe."),
            (titles[2], "Nils Moe is a Nordic author of sea novels."),
            (titles[3], "Orwick is a port city in Nordmark with studios."),
            (titles[4], "A film is a work of visual art."),
        ]);
        let ids = titles.map(|t| chunk_of(&kb, t));
        (dir, kb, ids)
    }

    /// Issue 34: a hyperlink between files of a folder leads to the linked file's passage,
    /// wherever the fusion ranks it and whether or not the anchor names its title.
    #[test]
    fn a_hyperlink_in_the_lead_passage_leads_to_the_linked_document() {
        let (_dir, kb) = crate::ingest::testing::kb_with_files(&[
            (
                "gatekeeper.md",
                "# Gatekeeper\n\nGatekeeper signs users in. Sessions live in [the shared cache](./beacon.md#setup).\n",
            ),
            ("beacon.md", "# Beacon\n\nBeacon is a cache that runs in Orwick.\n"),
            ("shipyard.md", "# Shipyard\n\nShipyard deploys services and keeps the shared cache settings.\n"),
        ]);
        let [gatekeeper, beacon, shipyard] = ["Gatekeeper", "Beacon", "Shipyard"].map(|t| chunk_of(&kb, t));
        let lead = kb.chunk(gatekeeper).unwrap();
        assert_eq!(lead.links.len(), 1, "the link is kept: {:?}", lead.links);
        assert_eq!(&lead.text[lead.links[0].anchor.0..lead.links[0].anchor.1], "the shared cache");
        assert!(!lead.text.contains("beacon.md"), "no link markup in the text: {}", lead.text);

        let fused = vec![(shipyard, 0.9), (gatekeeper, 0.8), (beacon, 0.1)];
        let (ranking, hop) = lead_with_link(&kb, Some(gatekeeper), fused.clone(), 1, &());
        assert_eq!(order(&ranking), vec![gatekeeper, beacon, shipyard]);
        assert_eq!(hop.map(|h| h.object).as_deref(), Some("the shared cache"));

        // Without the link, nothing in the text names Beacon: the fused order stands.
        let (_dir, unlinked) = crate::ingest::testing::kb_with_docs(&[
            ("Gatekeeper", "Gatekeeper signs users in. Sessions live in the shared cache."),
            ("Beacon", "Beacon is a cache that runs in Orwick."),
            ("Shipyard", "Shipyard deploys services and keeps the shared cache settings."),
        ]);
        let [gatekeeper, beacon, shipyard] = ["Gatekeeper", "Beacon", "Shipyard"].map(|t| chunk_of(&unlinked, t));
        let fused = vec![(shipyard, 0.9), (gatekeeper, 0.8), (beacon, 0.1)];
        let (ranking, hop) = lead_with_link(&unlinked, Some(gatekeeper), fused, 1, &());
        assert_eq!(order(&ranking), vec![gatekeeper, shipyard, beacon]);
        assert!(hop.is_none());
    }

    fn order(ranking: &[(ChunkId, f32)]) -> Vec<ChunkId> {
        ranking.iter().map(|(c, _)| *c).collect()
    }

    #[test]
    fn the_lead_comes_first_and_the_page_it_names_second() {
        let (_dir, kb, [kell, tide, moe, orwick, film]) = corpus();
        // The fused ranking puts the lead third and the page it names as a name fourth.
        let fused = vec![(orwick, 0.9), (moe, 0.8), (kell, 0.7), (tide, 0.6), (film, 0.5)];
        let (ranking, hop) = lead_with_link(&kb, Some(kell), fused.clone(), 10, &());
        assert_eq!(order(&ranking), vec![kell, tide, orwick, moe, film]);
        assert!(ranking.windows(2).all(|w| w[0].1 >= w[1].1), "scores stay in order: {ranking:?}");
        let hop = hop.expect("the hop that led to the page");
        assert_eq!(
            (hop.subject.as_str(), hop.relation.as_str(), hop.object.as_str()),
            ("Kell, Nordmark", MENTIONS, "Low Tide")
        );
        assert_eq!(hop.chunk, kell);

        // No lead (no text list): the fused ranking as it was.
        assert_eq!(lead_with_link(&kb, None, fused.clone(), 10, &()).0, fused);
    }

    #[test]
    fn below_the_candidates_only_a_page_named_as_a_name_is_a_link() {
        let (_dir, kb, [kell, tide, moe, orwick, film]) = corpus();
        let fused = vec![(orwick, 0.9), (moe, 0.8), (kell, 0.7), (film, 0.6), (tide, 0.5)];
        // Among the candidates, "film" names its page.
        let (ranking, hop) = lead_with_link(&kb, Some(kell), fused.clone(), 4, &());
        assert_eq!(order(&ranking), vec![kell, film, orwick, moe, tide]);
        assert_eq!(hop.map(|h| h.object).as_deref(), Some("film"));
        // Below them it is a common word, and the page named as a name follows the lead.
        let (ranking, hop) = lead_with_link(&kb, Some(kell), fused.clone(), 3, &());
        assert_eq!(order(&ranking), vec![kell, tide, orwick, moe, film]);
        assert_eq!(hop.map(|h| h.object).as_deref(), Some("Low Tide"));
        // A page neither the fused ranking nor what it leaves out holds is none.
        let (ranking, hop) = lead_with_link(&kb, Some(kell), fused[..4].to_vec(), 3, &());
        assert_eq!(order(&ranking), vec![kell, orwick, moe, film]);
        assert!(hop.is_none());
        // One the graph ranks below the fused ranking's end is found there.
        let below = Below(vec![moe, tide]);
        let (ranking, hop) = lead_with_link(&kb, Some(kell), fused[..4].to_vec(), 3, &below);
        assert_eq!(order(&ranking), vec![kell, tide, orwick, moe, film]);
        assert_eq!(hop.map(|h| h.object).as_deref(), Some("Low Tide"));
    }

    /// A graph ranking's passages below a fused ranking, in order.
    struct Below(Vec<ChunkId>);

    impl RankedBelow for Below {
        fn ranked_below(&self, wanted: &HashSet<ChunkId>) -> Vec<ChunkId> {
            self.0.iter().filter(|c| wanted.contains(c)).copied().collect()
        }
    }

    #[test]
    fn another_chunk_of_the_leads_own_document_is_no_link() {
        // A page long enough for several chunks, each naming its own title.
        let long: String = (0..60).map(|i| format!("Low Tide was shot in scene {i}. ")).collect();
        let (_dir, kb) = kb_with_docs(&[("Low Tide", &long), ("Nils Moe", "Nils Moe wrote it.")]);
        let own: Vec<ChunkId> =
            kb.chunk_ids().filter(|c| kb.chunk(*c).is_some_and(|ch| kb.chunk_title(ch) == "Low Tide")).collect();
        let moe = kb.chunk_ids().find(|c| !own.contains(c)).unwrap();
        assert!(own.len() >= 2, "the page spans {} chunks", own.len());
        let fused: Vec<(ChunkId, f32)> = own.iter().map(|c| (*c, 1.0)).chain([(moe, 0.5)]).collect();
        let (ranking, hop) = lead_with_link(&kb, Some(own[0]), fused, 10, &());
        assert!(hop.is_none(), "{hop:?}");
        assert_eq!(ranking[0].0, own[0]);
        assert_eq!(ranking.len(), own.len() + 1);
    }

    #[test]
    fn below_the_candidates_a_page_of_the_leads_own_topic_is_no_link() {
        let (_dir, kb) = kb_with_docs(&[
            ("Mira (ship)", "Mira is a ferry of the Kell line."),
            ("Mira (band)", "Mira is a rock band."),
            ("Nils Moe", "Nils Moe wrote it."),
        ]);
        let [myth, band, moe] = ["Mira (ship)", "Mira (band)", "Nils Moe"].map(|t| chunk_of(&kb, t));
        let fused = vec![(moe, 0.9), (myth, 0.8), (band, 0.7)];
        let (ranking, hop) = lead_with_link(&kb, Some(myth), fused.clone(), 1, &());
        assert_eq!(order(&ranking), vec![myth, moe, band]);
        assert!(hop.is_none(), "{hop:?}");
        // Among the candidates the evidence favours it, and it is the link.
        let (ranking, hop) = lead_with_link(&kb, Some(myth), fused, 3, &());
        assert_eq!(order(&ranking), vec![myth, band, moe]);
        assert_eq!(hop.map(|h| h.object).as_deref(), Some("Mira"));
    }

    #[test]
    fn a_lead_that_names_no_candidates_topic_is_followed_by_the_fused_order() {
        let (_dir, kb, [kell, tide, moe, orwick, film]) = corpus();
        // Nils Moe's page names no other passage's topic.
        let fused = vec![(tide, 0.9), (kell, 0.8), (moe, 0.7), (orwick, 0.6), (film, 0.5)];
        let (ranking, hop) = lead_with_link(&kb, Some(moe), fused, 10, &());
        assert_eq!(order(&ranking), vec![moe, tide, kell, orwick, film]);
        assert!(hop.is_none());
    }
}
