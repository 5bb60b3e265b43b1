//! The hybrid matcher: decides whether two mentions name the same entity, and how well a
//! query phrase aligns with a node. Edit similarity (strsim) and embedding cosine must agree,
//! except for the acronym rule, which neither measure sees ("CFH" vs "CFH Clearing").

use super::Table;

use super::mapped::{Reader, put_str};
use super::model::NodeId;
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
    blocking_keys_normalized(surface, &normalize_entity(surface))
}

/// [`blocking_keys`] of `surface`, whose `normalize_entity` is `key`.
fn blocking_keys_normalized(surface: &str, key: &str) -> Vec<String> {
    let mut keys = Vec::new();
    visit_blocking_keys(surface, key, |block| keys.push(block.to_owned()));
    keys.sort();
    keys.dedup();
    keys
}

/// Calls `visit` with each of [`blocking_keys_normalized`], in one reused buffer, a key
/// possibly twice: an open visits the keys of every alias of every node, and a string per
/// key cost it an allocation and a free each.
pub(super) fn visit_blocking_keys(surface: &str, key: &str, mut visit: impl FnMut(&str)) {
    let mut block = String::new();
    for word in key.split_whitespace().filter(|w| !crate::text::is_stopword(w)) {
        block.clear();
        push_word_block(&mut block, word);
        visit(&block);
    }
    const INITIALS: &str = "i:";
    block.clear();
    block.push_str(INITIALS);
    block.extend(surface.split_whitespace().filter_map(|w| w.chars().next()).filter(|c| c.is_uppercase()));
    if block.len() >= INITIALS.len() + 2 {
        visit(&block);
    }
    // Seven are enough to tell a name is too long to be an acronym.
    block.truncate(INITIALS.len());
    block.extend(surface.chars().filter(|c| c.is_alphanumeric()).take(7));
    let letters = &block[INITIALS.len()..];
    if (2..=6).contains(&letters.len()) && letters.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
        visit(&block);
    }
}

/// The blocking key of one lower-case word of a name: its first four characters.
pub fn word_block(word: &str) -> String {
    let mut block = String::new();
    push_word_block(&mut block, word);
    block
}

fn push_word_block(block: &mut String, word: &str) {
    block.push_str("w:");
    block.push_str(&word[..word.char_indices().nth(4).map_or(word.len(), |(at, _)| at)]);
}

pub fn edit_similarity(a_key: &str, b_key: &str) -> f32 {
    strsim::normalized_levenshtein(a_key, b_key) as f32
}

/// What the matcher needs of a node's name to pass over most candidates without reading the
/// node: its key's length in characters, which characters and which pairs of adjacent
/// characters the key holds (one bit each, several sharing a bit), and whether the name is
/// an acronym. A large document can put tens of thousands of names in one block
/// ("Institute", a common first name), and every new name is compared with its blocks: the
/// comparison must cost a few instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameSketch {
    pairs: u64,
    letters: u32,
    chars: u16,
    acronym: bool,
}

impl NameSketch {
    /// The sketch of a name `surface` whose `normalize_entity` is `key`.
    pub fn of(surface: &str, key: &str) -> Self {
        let letters = key.chars().fold(0u32, |bits, c| {
            let bit = if c.is_ascii_lowercase() { c as u32 - 'a' as u32 } else { 26 + c as u32 % 6 };
            bits | 1 << bit
        });
        let mut pairs = 0u64;
        for (a, b) in key.chars().zip(key.chars().skip(1)) {
            let mixed = (a as u32).wrapping_mul(0x9E37_79B9) ^ (b as u32).wrapping_mul(0x85EB_CA6B);
            pairs |= 1 << (mixed >> 26);
        }
        let chars = key.chars().count().min(u16::MAX as usize) as u16;
        NameSketch { pairs, letters, chars, acronym: acronym_letters(surface).is_some() }
    }

    /// Whether the name is an all-caps acronym, which the matcher may merge with a name it
    /// shares no characters with.
    pub fn is_acronym(&self) -> bool {
        self.acronym
    }

    /// The length of the key in characters.
    pub fn chars(&self) -> u16 {
        self.chars
    }

    /// The characters the key holds, one bit each (several sharing a bit).
    pub fn letters(&self) -> u32 {
        self.letters
    }

    /// The pairs of adjacent characters the key holds, one bit each (several sharing a bit).
    pub fn pairs(&self) -> u64 {
        self.pairs
    }

    /// What this sketch's name leaves possible of a name with `chars` characters, neither an
    /// acronym: `None` where the lengths alone rule a match out.
    pub fn admits(&self, chars: u16, settings: &AliasSettings) -> Option<Admits> {
        let edits = max_edits(usize::from(self.chars.max(chars)), settings.edit_threshold) as u32;
        (u32::from(self.chars.abs_diff(chars)) <= edits).then_some(Admits {
            letters: self.letters,
            pairs: self.pairs,
            letter_bits: 2 * edits,
            pair_bits: 4 * edits,
        })
    }

    /// The sketch as [`NameSketch::decoded`] reads it.
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.pairs.to_le_bytes());
        out.extend_from_slice(&self.letters.to_le_bytes());
        out.extend_from_slice(&self.chars.to_le_bytes());
        out.push(u8::from(self.acronym));
    }

    fn decoded(r: &mut Reader) -> Option<NameSketch> {
        let pairs = r.u64()?;
        let letters = r.u32()?;
        let [low, high, acronym] = r.bytes(3)?.try_into().ok()?;
        Some(NameSketch { pairs, letters, chars: u16::from_le_bytes([low, high]), acronym: acronym == 1 })
    }

    /// False only where [`same_entity`] is false for any two names with these sketches,
    /// whatever their vectors: neither is an acronym, and their keys are further apart than
    /// the edit threshold allows, by length, by the characters they hold (an edit adds or
    /// removes at most one character of each kind: two bits differ at most), or by their
    /// pairs of characters (an edit removes at most two pairs and adds two: four bits).
    pub fn may_be_same(&self, other: &NameSketch, settings: &AliasSettings) -> bool {
        if self.acronym || other.acronym {
            return true;
        }
        self.admits(other.chars, settings)
            .is_some_and(|admits| admits.letters(other.letters) && admits.pairs(other.pairs))
    }
}

/// The bits a name's sketch admits of another's of a given length ([`NameSketch::admits`]):
/// its letters and pairs may differ from the name's in at most so many bits each. A scan
/// of many names of one length tests their letters first, in a list of their own.
#[derive(Debug, Clone, Copy)]
pub struct Admits {
    letters: u32,
    pairs: u64,
    letter_bits: u32,
    pair_bits: u32,
}

impl Admits {
    pub fn letters(&self, letters: u32) -> bool {
        (self.letters ^ letters).count_ones() <= self.letter_bits
    }

    pub fn pairs(&self, pairs: u64) -> bool {
        (self.pairs ^ pairs).count_ones() <= self.pair_bits
    }
}

/// The most edits two keys whose longer one has `longest` characters may differ by and
/// still be at least `threshold` similar ([`edit_similarity`]); never fewer than the measure
/// allows, as the margin keeps float rounding from ruling out a pair the threshold accepts.
fn max_edits(longest: usize, threshold: f32) -> usize {
    // Truncation is the floor here (the float is never negative), without a call to libm's
    // `floor`: a large document's scan computes this for every length it meets.
    ((1.0 - threshold as f64) * longest as f64 + 1e-3).max(0.0) as usize
}

/// Blocking key -> the nodes with a name or alias carrying it, each with its name's sketch:
/// alias candidate generation for the committed KB (a write's own names are in
/// `kb::staged_names`, laid out for its scan). A common
/// key ("w:univ") can hold a large share of all nodes, so indexing or unindexing one must not
/// scan its block ([`BlockMembers`]).
#[derive(Default)]
pub struct AliasBlocks(Table<String, BlockMembers>);

/// The members of one block: a list sorted by node id, and the members added out of order
/// or removed since, folded into the list once they reach a quarter of it. Nodes get their
/// ids from one counter and an open indexes them in id order, so nearly every insert is a
/// push; a table per block, built an insert at a time, was most of a large KB's open that
/// the alias tables took (a hash and a probe per alias and block, and a growing table each).
#[derive(Default)]
pub struct BlockMembers {
    sorted: Vec<(NodeId, NameSketch)>,
    /// `Some`: a member the list lacks; `None`: a member of the list removed since.
    changed: Table<NodeId, Option<NameSketch>>,
    len: usize,
}

impl BlockMembers {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Puts `id` in the block with `sketch`, replacing its sketch if it is a member.
    pub fn insert(&mut self, id: NodeId, sketch: NameSketch) {
        // A node's aliases often share a block: its second one finds it last.
        if self.changed.is_empty() {
            match self.sorted.last_mut() {
                Some((last, kept)) if *last == id => {
                    *kept = sketch;
                    return;
                }
                Some((last, _)) if *last > id => {}
                _ => {
                    self.sorted.push((id, sketch));
                    self.len += 1;
                    return;
                }
            }
        }
        match self.sorted.binary_search_by_key(&id, |(member, _)| *member) {
            Ok(at) => {
                self.sorted[at].1 = sketch;
                if let Some(None) = self.changed.remove(&id) {
                    self.len += 1;
                }
            }
            Err(_) => {
                if self.changed.insert(id, Some(sketch)).is_none() {
                    self.len += 1;
                }
                self.fold_if_grown();
            }
        }
    }

    pub fn remove(&mut self, id: NodeId) {
        match self.changed.get(&id) {
            Some(Some(_)) => {
                self.changed.remove(&id);
                self.len -= 1;
            }
            Some(None) => {}
            None => {
                if self.sorted.binary_search_by_key(&id, |(member, _)| *member).is_ok() {
                    self.changed.insert(id, None);
                    self.len -= 1;
                    self.fold_if_grown();
                }
            }
        }
    }

    /// The members with their sketches, in no set order.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &NameSketch)> {
        let kept =
            self.sorted.iter().filter(|(id, _)| self.changed.is_empty() || !matches!(self.changed.get(id), Some(None)));
        let added = self.changed.iter().filter_map(|(id, sketch)| sketch.as_ref().map(|s| (*id, s)));
        kept.map(|(id, sketch)| (*id, sketch)).chain(added)
    }

    pub fn keys(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.iter().map(|(id, _)| id)
    }

    fn fold_if_grown(&mut self) {
        if !super::fold_due(self.changed.len(), self.sorted.len()) {
            return;
        }
        let mut sorted: Vec<(NodeId, NameSketch)> = self.iter().map(|(id, sketch)| (id, *sketch)).collect();
        sorted.sort_unstable_by_key(|(id, _)| *id);
        *self = BlockMembers { len: sorted.len(), sorted, changed: Table::default() };
    }
}

impl AliasBlocks {
    /// Puts `id`, whose name is sketched as `sketch`, in the blocks of `surface` (whose
    /// `normalize_entity` is `key`).
    pub fn insert_normalized(&mut self, surface: &str, key: &str, id: NodeId, sketch: NameSketch) {
        visit_blocking_keys(surface, key, |block| match self.0.get_mut(block) {
            Some(members) => members.insert(id, sketch),
            None => self.0.entry(block.to_owned()).or_default().insert(id, sketch),
        });
    }

    /// Takes `id` out of the blocks of `surface`.
    pub fn remove(&mut self, surface: &str, id: NodeId) {
        for block in blocking_keys(surface) {
            if let Some(ids) = self.0.get_mut(&block) {
                ids.remove(id);
                if ids.is_empty() {
                    self.0.remove(&block);
                }
            }
        }
    }

    /// The nodes in any of `blocks` whose sketch `keep` accepts, by id, each once.
    pub fn candidates(&self, blocks: &[String], keep: impl Fn(&NameSketch) -> bool) -> Vec<NodeId> {
        let mut out: Vec<NodeId> = blocks
            .iter()
            .filter_map(|k| self.0.get(k))
            .flat_map(BlockMembers::iter)
            .filter(|(_, sketch)| keep(sketch))
            .map(|(id, _)| id)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The nodes in a block whose key starts with one of `prefixes`, by id, each once.
    pub fn candidates_by_prefix(&self, prefixes: &[String]) -> Vec<NodeId> {
        let mut out: Vec<NodeId> = self
            .0
            .iter()
            .filter(|(block, _)| prefixes.iter().any(|p| block.starts_with(p.as_str())))
            .flat_map(|(_, ids)| ids.keys())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The members of one block, if any node carries its key.
    pub fn block(&self, key: &str) -> Option<&BlockMembers> {
        self.0.get(key)
    }

    /// Every block's members.
    pub fn members(&self) -> impl Iterator<Item = &BlockMembers> {
        self.0.values()
    }

    /// The blocks as [`AliasBlocks::decoded`] reads them: each block's key and its members in
    /// id order, so that reading them back is a copy per block.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.0.len() as u64).to_le_bytes());
        let mut members = Vec::new();
        for (key, block) in &self.0 {
            members.clear();
            members.extend(block.iter().map(|(id, sketch)| (id, *sketch)));
            members.sort_unstable_by_key(|(id, _)| *id);
            put_str(out, key);
            out.extend_from_slice(&(members.len() as u32).to_le_bytes());
            for (id, sketch) in &members {
                out.extend_from_slice(&id.to_le_bytes());
                sketch.encode(out);
            }
        }
    }

    /// The blocks [`AliasBlocks::encode`] wrote; `None` where the bytes are not such blocks
    /// (a block empty, or its members out of order or twice).
    pub fn decoded(r: &mut Reader) -> Option<AliasBlocks> {
        let blocks = r.long_list(|r| {
            let key = r.str()?.to_owned();
            let sorted = r.short_list(|r| Some((r.u32()?, NameSketch::decoded(r)?)))?;
            let ordered = !sorted.is_empty() && sorted.windows(2).all(|pair| pair[0].0 < pair[1].0);
            ordered.then(|| (key, BlockMembers { len: sorted.len(), sorted, changed: Table::default() }))
        })?;
        let mut table = Table::with_capacity_and_hasher(blocks.len(), Default::default());
        table.extend(blocks);
        Some(AliasBlocks(table))
    }
}

/// `edit_similarity(a, b) >= threshold`, computed no further than the threshold needs: the
/// distance is at least the difference in length, and the matrix is filled only within the
/// band of the edits allowed, stopping once a row exceeds them. Alias matching compares a
/// new mention with every node sharing a blocking key whose sketch leaves a match possible:
/// millions of pairs in a large document.
pub(super) fn edit_similarity_at_least(a_key: &str, b_key: &str, threshold: f32) -> bool {
    let (la, lb) = (a_key.chars().count(), b_key.chars().count());
    let longest = la.max(lb);
    if longest == 0 {
        return edit_similarity(a_key, b_key) >= threshold;
    }
    let bound = max_edits(longest, threshold);
    if la.abs_diff(lb) > bound {
        return false;
    }
    let distance = match levenshtein_within(a_key, b_key, bound) {
        Within::Distance(distance) => distance,
        Within::Beyond => return false,
        Within::NotComputed => strsim::levenshtein(a_key, b_key),
    };
    // The similarity as `strsim::normalized_levenshtein` and `edit_similarity` round it.
    (1.0 - distance as f64 / longest as f64) as f32 >= threshold
}

#[derive(Debug, PartialEq)]
enum Within {
    Distance(usize),
    Beyond,
    /// Not ASCII, or too long for the row kept on the stack.
    NotComputed,
}

/// The Levenshtein distance of two ASCII strings where it is at most `bound` (Ukkonen's
/// band: a cell further than `bound` from the diagonal costs more than `bound`).
fn levenshtein_within(a: &str, b: &str, bound: usize) -> Within {
    const LONGEST: usize = 127;
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if !a.is_ascii() || !b.is_ascii() || b.len() > LONGEST {
        return Within::NotComputed;
    }
    if a.len().abs_diff(b.len()) > bound {
        return Within::Beyond;
    }
    let beyond = bound + 1;
    // The previous row, then this one as it is filled; cells outside the band hold `beyond`.
    let mut row = [0usize; LONGEST + 1];
    for (j, cell) in row.iter_mut().enumerate().take(b.len() + 1) {
        *cell = j.min(beyond);
    }
    for (i, &a_char) in a.iter().enumerate().map(|(i, c)| (i + 1, c)) {
        let first = i.saturating_sub(bound).max(1);
        let last = (i + bound).min(b.len());
        let mut diagonal = row[first - 1];
        let mut left = if first == 1 { i.min(beyond) } else { beyond };
        row[first - 1] = left;
        let mut best = left;
        for j in first..=last {
            let up = row[j];
            let value = (diagonal + usize::from(a_char != b[j - 1])).min(up + 1).min(left + 1).min(beyond);
            diagonal = up;
            row[j] = value;
            left = value;
            best = best.min(value);
        }
        if best > bound {
            return Within::Beyond;
        }
    }
    match row[b.len()] {
        distance if distance <= bound => Within::Distance(distance),
        _ => Within::Beyond,
    }
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
    let Some(letters) = acronym_letters(short) else {
        return false;
    };
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

/// The letters of `surface` where it is an all-caps acronym (2-6 letters or digits, at least
/// one letter, tags in brackets stripped). Most names are not, and are told at their first
/// lower-case letter without a copy: the matcher asks of every pair it checks.
fn acronym_letters(surface: &str) -> Option<String> {
    let mut outside_tags = true;
    let mut letters = String::new();
    for c in surface.chars() {
        if c == '[' || c == ']' {
            outside_tags = !outside_tags;
        } else if outside_tags && c.is_alphanumeric() {
            if !(c.is_ascii_uppercase() || c.is_ascii_digit()) || letters.len() == 6 {
                return None;
            }
            letters.push(c);
        }
    }
    let is_acronym = letters.len() >= 2 && letters.chars().any(|c| c.is_ascii_uppercase());
    is_acronym.then_some(letters)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::embed::{Embedder, HashEmbedder, cosine};

    #[test]
    fn blocking_keys_are_word_prefixes_capital_initials_and_acronym_letters() {
        assert_eq!(blocking_keys("Harbor Light Brewing"), ["i:HLB", "w:brew", "w:harb", "w:ligh"]);
        assert_eq!(blocking_keys("NRWA"), ["i:NRWA", "w:nrwa"]);
        assert_eq!(blocking_keys("the Quay"), ["w:quay"], "a stopword and a lone capital give no key");
        let mut blocks = AliasBlocks::default();
        let (name, key) = ("Harbor Harbor Ales", "harbor harbor ales");
        blocks.insert_normalized(name, key, 4, NameSketch::of(name, key));
        assert_eq!(blocks.candidates(&blocking_keys("Harbor Works"), |_| true), [4]);
        assert_eq!(blocks.block("w:harb").map(BlockMembers::len), Some(1), "a word twice puts the node in once");
    }

    /// Inserts mostly in id order, some out of it, replacements and removals: the block reads
    /// as a plain table throughout, across folds.
    #[test]
    fn a_block_reads_as_a_plain_table_through_changes_and_folds() {
        let mut next = crate::kb::test_sequence(0x5851_F42D_4C95_7F2D);
        let sketches = [NameSketch::of("Anna Berg", "anna berg"), NameSketch::of("ABC", "abc")];
        let mut block = BlockMembers::default();
        let mut plain: Table<NodeId, NameSketch> = Table::default();
        let (mut counter, mut folded) = (0, false);
        for _ in 0..30_000 {
            let before = block.changed.len();
            let sketch = sketches[next(2) as usize];
            match next(10) {
                0..=5 => {
                    counter += 1 + next(3) as NodeId;
                    block.insert(counter, sketch);
                    plain.insert(counter, sketch);
                }
                6 => {
                    let id = next(u64::from(counter) + 1) as NodeId;
                    block.insert(id, sketch);
                    plain.insert(id, sketch);
                }
                _ => {
                    let id = next(u64::from(counter) + 1) as NodeId;
                    block.remove(id);
                    plain.remove(&id);
                }
            }
            folded |= before >= 1_000 && block.changed.is_empty();
            assert_eq!(block.len(), plain.len());
        }
        let mut members: Vec<(NodeId, NameSketch)> = block.iter().map(|(id, s)| (id, *s)).collect();
        let mut expected: Vec<(NodeId, NameSketch)> = plain.into_iter().collect();
        members.sort_unstable_by_key(|(id, _)| *id);
        expected.sort_unstable_by_key(|(id, _)| *id);
        assert!(members == expected, "the members differ from the plain table's");
        assert!(folded && !block.changed.is_empty(), "changes were folded in and gathered again");
    }

    /// The banded distance is strsim's wherever it is within the bound, and says beyond
    /// exactly where strsim's is not, on strings close to each other and far apart.
    #[test]
    fn banded_levenshtein_agrees_with_the_full_matrix() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (mut within, mut beyond) = (0, 0);
        for _ in 0..3_000 {
            let a: String = (0..rng.random_range(0..20)).map(|_| rng.random_range(b'a'..b'e') as char).collect();
            let mut b: Vec<char> = a.chars().collect();
            for _ in 0..rng.random_range(0..5) {
                let at = rng.random_range(0..=b.len());
                match rng.random_range(0..3) {
                    0 => b.insert(at, rng.random_range(b'a'..b'f') as char),
                    1 if at < b.len() => b[at] = 'z',
                    _ if at < b.len() => drop(b.remove(at)),
                    _ => b.push('y'),
                }
            }
            let b: String = b.into_iter().collect();
            let bound = rng.random_range(0..4);
            let full = strsim::levenshtein(&a, &b);
            let banded = levenshtein_within(&a, &b, bound);
            if full <= bound {
                assert_eq!(banded, Within::Distance(full), "{a:?} {b:?} within {bound}");
                within += 1;
            } else {
                assert_eq!(banded, Within::Beyond, "{a:?} {b:?} ({full} edits) within {bound}");
                beyond += 1;
            }
        }
        assert!(within >= 500 && beyond >= 500, "{within} within, {beyond} beyond");
        assert_eq!(levenshtein_within("café", "cafe", 1), Within::NotComputed);
    }

    #[test]
    fn acronyms_are_short_all_caps_names_outside_their_tags() {
        assert_eq!(acronym_letters("CFH").as_deref(), Some("CFH"));
        assert_eq!(acronym_letters("NRWA [organisation]").as_deref(), Some("NRWA"));
        assert_eq!(acronym_letters("B2B").as_deref(), Some("B2B"));
        for not_one in ["Cfh", "ABCDEFG", "A", "42", "CFH Clearing", "ÉCB", ""] {
            assert_eq!(acronym_letters(not_one), None, "{not_one:?}");
        }
    }

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

    /// The sketch filter may pass pairs the matcher rejects, never the reverse: names one to
    /// four edits apart (of every kind, spaces and capitals included), with any vectors.
    #[test]
    fn a_sketch_never_rules_out_a_pair_the_matcher_accepts() {
        use rand::{Rng, SeedableRng};
        let alphabet: Vec<char> = "abcdefghijklmnopqrstuvwxyz éüABCDEFGHIJ0123456789-".chars().collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut names: Vec<String> = vec!["CFH".into(), "CFH Clearing".into(), "AIP".into(), "Colour Research".into()];
        let settings = Settings::defaults().alias;
        let (mut accepted, mut ruled_out) = (0, 0);
        for _ in 0..400 {
            let base: String =
                (0..rng.random_range(3..30)).map(|_| alphabet[rng.random_range(0..alphabet.len())]).collect();
            let mut variant: Vec<char> = base.chars().collect();
            for _ in 0..rng.random_range(1..=4) {
                let at = rng.random_range(0..=variant.len());
                let c = alphabet[rng.random_range(0..alphabet.len())];
                match rng.random_range(0..3) {
                    0 => variant.insert(at, c),
                    1 if at < variant.len() => variant[at] = c,
                    _ if at < variant.len() => drop(variant.remove(at)),
                    _ => variant.push(c),
                }
            }
            names.push(base);
            names.push(variant.into_iter().collect());
        }
        for pair in names.chunks(2).chain(names.windows(2)) {
            let (a, b) = (&pair[0], &pair[1]);
            let (ka, kb) = (normalize_entity(a), normalize_entity(b));
            let same = same_entity(&mention(a, &ka), &mention(b, &kb), || Some(1.0), &settings);
            let possible = NameSketch::of(a, &ka).may_be_same(&NameSketch::of(b, &kb), &settings);
            assert!(possible || !same, "{a:?} and {b:?} match but their sketches rule it out");
            accepted += usize::from(same);
            ruled_out += usize::from(!possible);
        }
        // Both sides are exercised: matches kept, and most non-matches ruled out unread.
        assert!(accepted >= 40, "only {accepted} pairs matched");
        assert!(ruled_out >= 300, "only {ruled_out} pairs ruled out");
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
