//! The names a write creates, in blocks laid out for the alias scan. A large document
//! creates tens of thousands of names, and one block ("w:anna", "w:inst") can hold a large
//! share of them, each compared with every new mention sharing the block: a 16 MB document
//! reads hundreds of millions of members. So a staged block keeps its members by the length
//! of their keys, which fixes the edit bound of each group, and each group's letters (the
//! sketch's part read first) in a list of their own, tested a chunk at a time with no branch:
//! four bytes read per member instead of a row of twenty-four, in an order the processor
//! streams, and the pairs of characters read only where the letters leave a match possible.
//!
//! A member the sketch passes is then read where it lies: the group keeps its keys side by
//! side, so a name whose key is further from the mention's than the edit threshold allows
//! (nearly all of them: a sketch says what may match, not what does) is passed over without
//! looking up its node, its entry in the write's names or its vector, each a miss of the
//! processor's caches once a write holds a hundred thousand names.
//!
//! The candidates are exactly the members [`NameSketch::may_be_same`] passes, as a scan of
//! [`super::align::AliasBlocks`] finds them, less those [`super::align::same_entity`] cannot
//! take for the mention's by their keys (tested against such a scan), so merges are unchanged.

use super::Table;
use super::align::{NameSketch, edit_similarity_at_least, visit_blocking_keys};
use super::model::NodeId;
use crate::config::AliasSettings;
use crate::text::normalize_entity;

pub(super) struct StagedNames {
    blocks: Table<String, StagedBlock>,
    /// Each staged node's name's key and sketch, which every block it joins carries.
    names: Table<NodeId, (Box<str>, NameSketch)>,
}

/// One block's members in the order they joined (a node joins again, harmlessly, when a
/// second alias of it shares the block): those that are not acronyms by the length of their
/// keys, and the acronyms apart, since the matcher may merge an acronym with a name it
/// shares no letters with.
#[derive(Default)]
struct StagedBlock {
    lengths: Vec<LengthGroup>,
    acronyms: Vec<NodeId>,
}

/// The members of a block whose keys have `chars` characters, as parallel lists; member
/// `i`'s key is `keys[start..key_ends[i]]`, `start` being `key_ends[i - 1]`, or 0 for the
/// first.
struct LengthGroup {
    chars: u16,
    ids: Vec<NodeId>,
    letters: Vec<u32>,
    pairs: Vec<u64>,
    keys: String,
    key_ends: Vec<usize>,
}

impl LengthGroup {
    fn key(&self, at: usize) -> &str {
        let start = if at == 0 { 0 } else { self.key_ends[at - 1] };
        &self.keys[start..self.key_ends[at]]
    }
}

impl StagedBlock {
    fn push(&mut self, id: NodeId, key: &str, sketch: NameSketch) {
        if sketch.is_acronym() {
            self.acronyms.push(id);
            return;
        }
        // A block's names have a few dozen lengths at most: a list beats a table.
        let at = match self.lengths.iter().position(|group| group.chars == sketch.chars()) {
            Some(at) => at,
            None => {
                let chars = sketch.chars();
                self.lengths.push(LengthGroup {
                    chars,
                    ids: Vec::new(),
                    letters: Vec::new(),
                    pairs: Vec::new(),
                    keys: String::new(),
                    key_ends: Vec::new(),
                });
                self.lengths.len() - 1
            }
        };
        let group = &mut self.lengths[at];
        group.ids.push(id);
        group.letters.push(sketch.letters());
        group.pairs.push(sketch.pairs());
        group.keys.push_str(key);
        group.key_ends.push(group.keys.len());
    }

    /// Appends to `out` the members that `sketch`'s name, whose key is `key`, may be the same
    /// entity as. Neither side of a pair in a length group is an acronym, so the matcher
    /// takes such a pair only where the keys are equal or within the edit threshold.
    fn collect(&self, sketch: &NameSketch, key: &str, settings: &AliasSettings, out: &mut Vec<NodeId>) {
        out.extend_from_slice(&self.acronyms);
        if sketch.is_acronym() {
            out.extend(self.lengths.iter().flat_map(|group| &group.ids));
            return;
        }
        for group in &self.lengths {
            let Some(admits) = sketch.admits(group.chars, settings) else {
                continue;
            };
            const CHUNK: usize = 64;
            for (chunk, letters) in group.letters.chunks(CHUNK).enumerate() {
                let mut possible = 0u64;
                for (bit, &member) in letters.iter().enumerate() {
                    possible |= u64::from(admits.letters(member)) << bit;
                }
                while possible != 0 {
                    let at = chunk * CHUNK + possible.trailing_zeros() as usize;
                    possible &= possible - 1;
                    if admits.pairs(group.pairs[at]) {
                        let member = group.key(at);
                        if member == key || edit_similarity_at_least(key, member, settings.edit_threshold) {
                            out.push(group.ids[at]);
                        }
                    }
                }
            }
        }
    }
}

impl StagedNames {
    pub fn new() -> Self {
        StagedNames { blocks: Table::default(), names: Table::default() }
    }

    /// Registers the node `id` this write creates, whose name's `normalize_entity` is `key`
    /// and whose sketch is `sketch`; [`StagedNames::index_alias`] puts it in blocks.
    pub fn create(&mut self, id: NodeId, key: &str, sketch: NameSketch) {
        self.names.insert(id, (key.into(), sketch));
    }

    /// The `normalize_entity` of the name of `id`, where this write created it: the matcher
    /// compares keys, and a large document's candidates are millions.
    pub fn key(&self, id: NodeId) -> Option<&str> {
        self.names.get(&id).map(|(key, _)| &**key)
    }

    /// Puts the staged node `id` in the blocks of `surface`, one of its aliases; nodes this
    /// write did not create are not put in.
    pub fn index_alias(&mut self, id: NodeId, surface: &str) {
        let Some((key, sketch)) = self.names.get(&id) else {
            return;
        };
        visit_blocking_keys(surface, &normalize_entity(surface), |block| match self.blocks.get_mut(block) {
            Some(members) => members.push(id, key, *sketch),
            None => self.blocks.entry(block.to_owned()).or_default().push(id, key, *sketch),
        });
    }

    /// The staged nodes in any of `blocks` whose names leave a match possible with a
    /// mention whose key is `key` and sketch `sketch`, by id, each once.
    pub fn candidates(
        &self,
        blocks: &[String],
        sketch: &NameSketch,
        key: &str,
        settings: &AliasSettings,
    ) -> Vec<NodeId> {
        let mut out = Vec::new();
        for block in blocks.iter().filter_map(|block| self.blocks.get(block.as_str())) {
            block.collect(sketch, key, settings, &mut out);
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::kb::align::{AliasBlocks, Mention, blocking_keys, same_entity};
    use rand::{Rng, SeedableRng};

    /// Names drawn from few letters, so that many are a few edits apart, acronyms among
    /// them, in a few shared blocks: every mention gets the candidates a scan of the same
    /// names in [`AliasBlocks`] gives, less those whose keys are too far from the mention's,
    /// at several thresholds, nodes sitting in the blocks of other aliases too; and the
    /// matcher takes none of those left out, even at a cosine of 1.
    #[test]
    fn candidates_are_the_sketch_scans_less_what_keys_rule_out() {
        let alphabet: Vec<char> = "abéo ".chars().collect();
        let firsts = ["Anna", "Anne", "Boris", "CFH", "AB"];
        for (seed, threshold) in [(1, 0.88), (2, 0.8), (3, 0.6), (4, 0.0)] {
            let mut settings = Settings::defaults().alias;
            settings.edit_threshold = threshold;
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut names = StagedNames::new();
            let mut scan = AliasBlocks::default();
            let (mut found, mut ruled_out, mut by_key) = (0, 0, 0);
            let mut staged: Vec<(String, String, NameSketch)> = Vec::new();
            for id in 0..800u32 {
                let tail: String =
                    (0..rng.random_range(0..14)).map(|_| alphabet[rng.random_range(0..alphabet.len())]).collect();
                let mention = format!("{} {tail}", firsts[rng.random_range(0..firsts.len())]).trim().to_string();
                let key = normalize_entity(&mention);
                let sketch = NameSketch::of(&mention, &key);
                let blocks = blocking_keys(&mention);
                let candidates = names.candidates(&blocks, &sketch, &key, &settings);
                let scanned = scan.candidates(&blocks, |other| sketch.may_be_same(other, &settings));
                let (kept, passed): (Vec<NodeId>, Vec<NodeId>) = scanned.iter().partition(|&&other| {
                    let (_, other_key, other_sketch) = &staged[other as usize];
                    sketch.is_acronym()
                        || other_sketch.is_acronym()
                        || *other_key == key
                        || edit_similarity_at_least(&key, other_key, threshold)
                });
                assert_eq!(candidates, kept, "threshold {threshold}, {mention:?}");
                let me = Mention { surface: &mention, key: &key };
                for other in passed {
                    let (surface, other_key, _) = &staged[other as usize];
                    let other = Mention { surface, key: other_key };
                    assert!(!same_entity(&me, &other, || Some(1.0), &settings), "{mention:?} / {surface:?}");
                    by_key += 1;
                }
                found += candidates.len();
                ruled_out += scan.candidates(&blocks, |_| true).len() - scanned.len();
                staged.push((mention.clone(), key.clone(), sketch));
                names.create(id, &key, sketch);
                names.index_alias(id, &mention);
                scan.insert_normalized(&mention, &key, id, sketch);
                // A node also sits in the blocks of its other aliases, with its name's key.
                if id % 3 == 0 {
                    let alias = format!("{} Boris", firsts[rng.random_range(0..firsts.len())]);
                    names.index_alias(id, &alias);
                    scan.insert_normalized(&alias, &normalize_entity(&alias), id, sketch);
                }
            }
            assert!(found >= 1_000, "threshold {threshold}: only {found} candidates");
            if threshold >= 0.8 {
                assert!(ruled_out >= 10_000, "threshold {threshold}: only {ruled_out} members ruled out");
                assert!(by_key >= 1_000, "threshold {threshold}: only {by_key} members passed over by their keys");
            }
        }
    }
}
