//! A commit too large for one sled batch, applied in parts that undo records make atomic
//! again. sled 0.34 copies a leaf on every insert and frees the old copy only once no epoch
//! guard predates it, and `apply_batch` holds one guard from the batch's first write to its
//! last: one 16 MB document, a million and a half writes, held about 12 GB of leaf copies and
//! spent a third of its time faulting that memory in. In parts each part's batch also writes
//! `meta/undo/N`, what its keys held before; the commit's final batch, which writes its
//! change-log entry, removes every undo record. An open that finds undo records (a crash
//! between the parts and that batch) puts the old values back, so a crash still keeps all of
//! a commit or none of it.

use crate::error::{Error, Result};

/// KB writes per sled batch of a commit in parts: enough that a batch's fixed cost (its
/// seal in sled's log) stays small, few enough that its leaf copies are a few MB.
pub(super) const PART: usize = 1024;
/// `meta/undo/N` (N big-endian): the old values of the keys part N of an unfinished commit
/// wrote (see [`encode`]).
pub(super) const META_UNDO: &[u8] = b"meta/undo/";

/// One KB write: the key, and its new value (`None` removes it).
pub(super) type KbWrite = (Vec<u8>, Option<Vec<u8>>);

/// Applies every part of `writes` (one write per key) but the last, each with its undo
/// record, and returns the last part with the undo keys, both for the commit's final batch
/// to apply and remove. On failure the parts applied stay, with their records, for the
/// caller to undo.
pub(super) fn apply_leading_parts(tree: &sled::Tree, mut writes: Vec<KbWrite>) -> Result<(Vec<KbWrite>, Vec<Vec<u8>>)> {
    // In key order each part spans a narrow range of keys, which [`old_values`] reads in one
    // pass. Stable, so that of two writes of one key the later still lands last.
    writes.sort_by(|a, b| a.0.cmp(&b.0));
    let last = writes.split_off(writes.len().saturating_sub(PART));
    let mut undo_keys = Vec::with_capacity(writes.len() / PART);
    for (n, part) in writes.chunks(PART).enumerate() {
        let undo_key = [META_UNDO, &(n as u64).to_be_bytes()].concat();
        apply_part(tree, &undo_key, part)?;
        undo_keys.push(undo_key);
        release_leaf_copies();
    }
    Ok((last, undo_keys))
}

fn apply_part(tree: &sled::Tree, undo_key: &[u8], part: &[KbWrite]) -> Result<()> {
    let mut undo = Vec::new();
    let mut batch = sled::Batch::default();
    for ((key, value), old) in part.iter().zip(old_values(tree, part)?) {
        encode(&mut undo, key, old.as_deref());
        stage(&mut batch, key.as_slice(), value.as_deref());
    }
    batch.insert(undo_key, undo);
    tree.apply_batch(batch)?;
    Ok(())
}

/// What each key of `part`, sorted by key, holds now (`None`: absent). A large write's keys
/// are mostly new ones, and a lookup per key walked sled's tree from its root for nothing:
/// a quarter of a 16 MB document's commit, growing with the tree. So the part's range of keys
/// is read in one pass, which finds the few that exist; where the range holds many other
/// keys (a write touching keys spread among many it leaves alone), the rest are looked up
/// one by one after all.
fn old_values(tree: &sled::Tree, part: &[KbWrite]) -> Result<Vec<Option<sled::IVec>>> {
    let mut olds = vec![None; part.len()];
    let (Some((first, _)), Some((last, _))) = (part.first(), part.last()) else {
        return Ok(olds);
    };
    // Past this many stored keys in the range, lookups read less than the pass would.
    let most_to_pass = 2 * part.len();
    let mut at = 0;
    for (passed, entry) in tree.range(first.as_slice()..=last.as_slice()).enumerate() {
        if passed == most_to_pass {
            for (old, (key, _)) in olds[at..].iter_mut().zip(&part[at..]) {
                *old = tree.get(key)?;
            }
            break;
        }
        let (key, value) = entry?;
        while part.get(at).is_some_and(|(k, _)| k.as_slice() < key.as_ref()) {
            at += 1;
        }
        while part.get(at).is_some_and(|(k, _)| k.as_slice() == key.as_ref()) {
            olds[at] = Some(value.clone());
            at += 1;
        }
    }
    Ok(olds)
}

/// Puts back what the parts of an unfinished commit overwrote; the number of parts undone.
/// Each part is undone in one batch that also removes its record, so a crash while undoing
/// leaves the rest to undo again.
pub(super) fn roll_back(tree: &sled::Tree) -> Result<usize> {
    let records: Vec<(sled::IVec, sled::IVec)> = tree.scan_prefix(META_UNDO).collect::<sled::Result<_>>()?;
    for (undo_key, record) in &records {
        let mut batch = sled::Batch::default();
        for (key, old) in decode(undo_key, record)? {
            stage(&mut batch, key, old);
        }
        batch.remove(undo_key.as_ref());
        tree.apply_batch(batch)?;
    }
    Ok(records.len())
}

/// Adds one write to `batch`: `value` stored under `key`, or `key` removed where it is `None`.
pub(super) fn stage<K: Into<sled::IVec>, V: Into<sled::IVec>>(batch: &mut sled::Batch, key: K, value: Option<V>) {
    match value {
        Some(value) => batch.insert(key, value),
        None => batch.remove(key),
    }
}

/// Lets the leaf copies a batch left be freed now. sled defers their freeing to
/// crossbeam-epoch's default collector, which collects a few hundred objects each time a
/// thread pins it a hundred times; a writer alone pins once per batch, so without this the
/// copies of every part would pile up as in one batch.
pub(super) fn release_leaf_copies() {
    for _ in 0..64 {
        crossbeam_epoch::pin().flush();
    }
}

/// A key a part wrote and the value it held before (`None`: absent).
type UndoEntry<'a> = (&'a [u8], Option<&'a [u8]>);

/// Appends one undo entry: the key, and the value it held (`None`: absent).
fn encode(out: &mut Vec<u8>, key: &[u8], old: Option<&[u8]>) {
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    match old {
        None => out.push(0),
        Some(value) => {
            out.push(1);
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value);
        }
    }
}

/// The entries [`encode`] wrote into `record`, the value of `undo_key`.
fn decode<'a>(undo_key: &[u8], record: &'a [u8]) -> Result<Vec<UndoEntry<'a>>> {
    let corrupt = || Error::Corrupt {
        key: String::from_utf8_lossy(undo_key).into_owned(),
        message: "a damaged undo record of an interrupted write: restore the data directory from a backup".into(),
    };
    let mut rest = record;
    let mut entries = Vec::new();
    while !rest.is_empty() {
        let key = take_prefixed(&mut rest).ok_or_else(corrupt)?;
        let (&present, tail) = rest.split_first().ok_or_else(corrupt)?;
        rest = tail;
        let old = match present {
            0 => None,
            1 => Some(take_prefixed(&mut rest).ok_or_else(corrupt)?),
            _ => return Err(corrupt()),
        };
        entries.push((key, old));
    }
    Ok(entries)
}

/// The bytes after a little-endian u32 length at the front of `rest`, if all are there.
fn take_prefixed<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (len, tail) = rest.split_first_chunk::<4>()?;
    let (bytes, tail) = tail.split_at_checked(u32::from_le_bytes(*len) as usize)?;
    *rest = tail;
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part's old values read in one pass are what a lookup of each key gives: keys
    /// absent and present, a key written twice, stored keys between and around the part's,
    /// and a range so crowded with keys the part leaves alone that the pass gives way to
    /// lookups midway.
    #[test]
    fn old_values_are_what_each_key_holds() {
        let tree = sled::Config::new().temporary(true).open().unwrap().open_tree("kb").unwrap();
        for i in (0..600u32).step_by(3) {
            tree.insert(format!("k/{i:04}"), format!("v{i}").as_bytes()).unwrap();
        }
        let write = |i: u32| (format!("k/{i:04}").into_bytes(), Some(b"new".to_vec()));
        let sparse: Vec<KbWrite> = [0, 1, 2, 3, 3, 9, 10, 11, 12].into_iter().map(write).collect();
        let crowded: Vec<KbWrite> = [0, 1, 4, 100, 101, 102, 200, 201, 590, 600].into_iter().map(write).collect();
        for part in [&sparse, &crowded, &Vec::new()] {
            let looked_up: Vec<Option<sled::IVec>> = part.iter().map(|(key, _)| tree.get(key).unwrap()).collect();
            assert_eq!(old_values(&tree, part).unwrap(), looked_up);
            assert!(looked_up.iter().any(Option::is_some) || part.is_empty());
            assert!(looked_up.iter().any(Option::is_none) || part.is_empty());
        }
    }

    #[test]
    fn undo_entries_read_back_and_a_cut_record_is_refused() {
        let mut record = Vec::new();
        let mut ends = Vec::new();
        for (key, old) in [(&b"chunk/1"[..], None), (b"node/2", Some(&b"old name"[..])), (b"", Some(b""))] {
            encode(&mut record, key, old);
            ends.push(record.len());
        }
        let entries = decode(b"meta/undo/x", &record).unwrap();
        assert_eq!(
            entries,
            vec![(&b"chunk/1"[..], None), (&b"node/2"[..], Some(&b"old name"[..])), (&b""[..], Some(&b""[..]))]
        );
        for cut in 1..record.len() {
            match ends.iter().position(|&end| end == cut) {
                // Where an entry ends, the shorter record is whole, with fewer entries.
                Some(whole) => assert_eq!(decode(b"meta/undo/x", &record[..cut]).unwrap().len(), whole + 1),
                None => assert!(decode(b"meta/undo/x", &record[..cut]).is_err(), "cut at {cut} read as whole"),
            }
        }
        let mut bad_flag = Vec::new();
        encode(&mut bad_flag, b"k", None);
        *bad_flag.last_mut().unwrap() = 7;
        assert!(matches!(decode(b"meta/undo/x", &bad_flag), Err(Error::Corrupt { .. })));
    }
}
