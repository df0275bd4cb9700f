//! Memory-mapped example shards and their manifest.
//!
//! A shard is a flat file of fixed-size records, one per example:
//! `[length: u16 LE][segment_a_len: u16 LE][max_seq_len token ids, u16 or u32 LE, 0-padded]`,
//! so example i of a shard starts at `i * record_size` and is read without parsing.
//! `manifest.json` records the layout, the tokenizer fingerprint and the counts.
//!
//! A corpus of sentence triples (`prepare --triples`, manifest field `cline`) holds one sentence
//! triple per record: `[len ori, len syn, len ant, 0: u16 LE][ori ids][syn ids][ant ids]` (each
//! `max_seq_len` ids, 0-padded) `[syn labels][ant labels]` (each `max_seq_len` bytes, i8: 0 / 1 / 2
//! / −100, see [`crate::text::triples`]).

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde::{Deserialize, Serialize};

use super::examples::Example;
use super::tokenizer::SpecialIds;
use crate::{Error, Result};

pub const MANIFEST: &str = "manifest.json";
pub const FORMAT_VERSION: u32 = 1;

/// What a corpus's records hold, and so which training step trains on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKind {
    /// Packed examples of one or two segments (`prepare`).
    Packed,
    /// Sentence triples: a sentence, its synonym and its antonym version (`prepare --triples`).
    Triples,
}

impl DataKind {
    /// What it is, and the command that makes it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Packed => "packed examples (`trueneg prepare`)",
            Self::Triples => "sentence triples (`trueneg prepare --triples`)",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardInfo {
    pub file: String,
    pub examples: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub max_seq_len: usize,
    /// Bytes per token id: 2 (vocabulary < 65536) or 4.
    pub token_bytes: usize,
    pub vocab_size: usize,
    pub tokenizer_fingerprint: String,
    pub special_ids: SpecialIds,
    pub seed: u64,
    pub examples: usize,
    pub tokens: u64,
    pub single_segment_examples: usize,
    pub inputs: Vec<String>,
    pub shards: Vec<ShardInfo>,
    /// Set for a corpus of sentence triples: how they were made (the field's name in the file is
    /// the objective's that trains on them).
    #[serde(default, rename = "cline", skip_serializing_if = "Option::is_none")]
    pub triples: Option<TripleData>,
}

impl Manifest {
    /// sha256 of the manifest (counts, inputs, shards, tokenizer, seed): a corpus prepared
    /// again from other text gives another one.
    pub fn content_fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let bytes = serde_json::to_vec(self).expect("a manifest serialises");
        Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// What `prepare --triples` did: its settings and counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TripleData {
    pub config: super::triples::TripleConfig,
    /// Sentences read.
    pub sentences: usize,
    /// Sentences left out: no word to replace on one side.
    pub skipped: usize,
    /// Words replaced in x_syn, by kind.
    pub syn_synonyms: usize,
    pub syn_hypernyms: usize,
    pub syn_inflections: usize,
    /// Words replaced in x_ant, by kind.
    pub ant_antonyms: usize,
    pub ant_random: usize,
    /// Examples whose three sentences were cut to `max_seq_len`.
    pub truncated: usize,
}

/// One sentence triple: the three sentences as ids (with `[CLS]`/`[SEP]`) and the detection labels
/// of x_syn and x_ant (−100 on special tokens).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TripleRecord {
    pub ori: Vec<u32>,
    pub syn: Vec<u32>,
    pub ant: Vec<u32>,
    pub syn_labels: Vec<i8>,
    pub ant_labels: Vec<i8>,
}

impl Manifest {
    pub fn record_size(&self) -> usize {
        if self.triples.is_some() {
            8 + self.max_seq_len * (3 * self.token_bytes + 2)
        } else {
            4 + self.max_seq_len * self.token_bytes
        }
    }

    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST);
        let bytes = crate::io::read::read(&path, crate::io::limit::SMALL)?;
        let m: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Input(format!("{}: invalid manifest ({e})", path.display())))?;
        if m.format_version != FORMAT_VERSION {
            return Err(Error::Input(format!(
                "{}: field `format_version` is {}, this trueneg reads {FORMAT_VERSION}",
                path.display(),
                m.format_version
            )));
        }
        m.check_itself()
            .map_err(|why| Error::Input(format!("{}: {why}", path.display())))?;
        Ok(m)
    }

    /// What the manifest claims, checked against itself: at least one shard, each file named
    /// once, each shard and the corpus non-empty, sizes that fit a record, and five distinct
    /// special ids inside the vocabulary.
    fn check_itself(&self) -> std::result::Result<(), String> {
        if self.shards.is_empty() || self.examples == 0 {
            return Err("lists no examples (field `shards` is empty or `examples` 0); prepare the corpus again".into());
        }
        let mut files = std::collections::BTreeSet::new();
        for s in &self.shards {
            if !files.insert(s.file.as_str()) {
                return Err(format!(
                    "field `shards` names {:?} twice",
                    crate::io::short(&s.file)
                ));
            }
            if s.examples == 0 {
                return Err(format!(
                    "field `shards`: {:?} holds 0 examples",
                    crate::io::short(&s.file)
                ));
            }
        }
        if !(8..=u16::MAX as usize).contains(&self.max_seq_len) {
            return Err(format!(
                "field `max_seq_len` is {}, out of range (8 to 65535)",
                self.max_seq_len
            ));
        }
        let fits = match self.token_bytes {
            2 => self.vocab_size <= 1 << 16,
            4 => true,
            _ => false,
        };
        if !fits {
            return Err(format!(
                "field `token_bytes` is {} for a vocabulary of {} (2 holds up to 65536 ids, 4 any)",
                self.token_bytes, self.vocab_size
            ));
        }
        let s = &self.special_ids;
        let ids = [s.pad, s.unk, s.cls, s.sep, s.mask];
        let distinct: std::collections::BTreeSet<u32> = ids.into_iter().collect();
        if distinct.len() != ids.len() || ids.iter().any(|&i| i as usize >= self.vocab_size) {
            return Err(format!(
                "field `special_ids` ({ids:?} for pad, unk, cls, sep, mask) must be five distinct ids below `vocab_size` {}",
                self.vocab_size
            ));
        }
        Ok(())
    }
}

fn put_ids(out: &mut [u8], ids: &[u32], token_bytes: usize) {
    for (i, &t) in ids.iter().enumerate() {
        let at = i * token_bytes;
        if token_bytes == 2 {
            out[at..at + 2].copy_from_slice(&(t as u16).to_le_bytes());
        } else {
            out[at..at + 4].copy_from_slice(&t.to_le_bytes());
        }
    }
}

fn get_ids(r: &[u8], len: usize, token_bytes: usize) -> Vec<u32> {
    (0..len)
        .map(|k| {
            let at = k * token_bytes;
            if token_bytes == 2 {
                u16::from_le_bytes([r[at], r[at + 1]]) as u32
            } else {
                u32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]])
            }
        })
        .collect()
}

/// Encodes records into a shard's bytes.
type Encode<'a, R> = Box<dyn Fn(&[R]) -> Vec<u8> + 'a>;

/// Shards `shard-NNNNN.bin` of `per_shard` records written as records come: a shard's encoded
/// bytes are held until it is full.
pub struct ShardWriter<'a, R> {
    dir: &'a Path,
    per_shard: usize,
    encode: Encode<'a, R>,
    bytes: Vec<u8>,
    count: usize,
    shards: Vec<ShardInfo>,
}

impl<'a, R> ShardWriter<'a, R> {
    pub fn new(dir: &'a Path, per_shard: usize, encode: impl Fn(&[R]) -> Vec<u8> + 'a) -> Self {
        Self {
            dir,
            per_shard,
            encode: Box::new(encode),
            bytes: Vec::new(),
            count: 0,
            shards: Vec::new(),
        }
    }

    /// Adds `records`, each run that fits the current shard encoded at once; a full shard is
    /// written.
    pub fn push(&mut self, mut records: &[R]) -> Result<()> {
        while !records.is_empty() {
            let (now, rest) = records.split_at(records.len().min(self.per_shard - self.count));
            self.bytes.extend((self.encode)(now));
            self.count += now.len();
            if self.count == self.per_shard {
                self.write()?;
            }
            records = rest;
        }
        Ok(())
    }

    fn write(&mut self) -> Result<()> {
        let file = format!("shard-{:05}.bin", self.shards.len());
        crate::io::write_atomic(&self.dir.join(&file), &self.bytes)?;
        self.shards.push(ShardInfo {
            file,
            examples: std::mem::take(&mut self.count),
        });
        self.bytes.clear();
        Ok(())
    }

    /// Writes the last, partial shard; returns all shards.
    pub fn finish(mut self) -> Result<Vec<ShardInfo>> {
        if self.count > 0 {
            self.write()?;
        }
        Ok(self.shards)
    }
}

/// Encodes examples into one shard's bytes.
pub fn encode_records(examples: &[Example], max_seq_len: usize, token_bytes: usize) -> Vec<u8> {
    let rec = 4 + max_seq_len * token_bytes;
    let mut out = vec![0u8; rec * examples.len()];
    for (ex, chunk) in examples.iter().zip(out.chunks_exact_mut(rec)) {
        assert!(ex.tokens.len() <= max_seq_len && max_seq_len <= u16::MAX as usize);
        chunk[0..2].copy_from_slice(&(ex.tokens.len() as u16).to_le_bytes());
        chunk[2..4].copy_from_slice(&(ex.segment_a_len as u16).to_le_bytes());
        put_ids(&mut chunk[4..], &ex.tokens, token_bytes);
    }
    out
}

/// Encodes sentence triples into one shard's bytes.
pub fn encode_triples(records: &[TripleRecord], max_seq_len: usize, token_bytes: usize) -> Vec<u8> {
    let l = max_seq_len;
    let rec = 8 + l * (3 * token_bytes + 2);
    let mut out = vec![0u8; rec * records.len()];
    for (r, chunk) in records.iter().zip(out.chunks_exact_mut(rec)) {
        let sides = [&r.ori, &r.syn, &r.ant];
        for (k, ids) in sides.iter().enumerate() {
            assert!(ids.len() <= l && l <= u16::MAX as usize);
            chunk[2 * k..2 * k + 2].copy_from_slice(&(ids.len() as u16).to_le_bytes());
            put_ids(&mut chunk[8 + k * l * token_bytes..], ids, token_bytes);
        }
        let labels = 8 + 3 * l * token_bytes;
        for (k, lab) in [&r.syn_labels, &r.ant_labels].iter().enumerate() {
            for (i, &v) in lab.iter().enumerate() {
                chunk[labels + k * l + i] = v as u8;
            }
        }
    }
    out
}

/// All shards of a prepared corpus, memory-mapped; example i is addressed across shards.
pub struct ShardSet {
    pub manifest: Manifest,
    pub dir: PathBuf,
    maps: Vec<Mmap>,
    /// Index of the first example of each shard.
    starts: Vec<usize>,
}

impl ShardSet {
    /// Opens a prepared folder: the manifest, its shards (sizes checked) and its tokenizer
    /// (checked against the manifest's fingerprint: the ids mean nothing with another).
    pub fn open(dir: &Path) -> Result<Self> {
        let manifest = Manifest::read(dir)?;
        let rec = manifest.record_size();
        let mut maps = Vec::new();
        let mut starts = Vec::new();
        let mut total = 0;
        let manifest_path = dir.join(MANIFEST);
        let mut seen = std::collections::HashMap::new();
        for s in &manifest.shards {
            let path = crate::io::place::inside(dir, &s.file, &manifest_path, "shards[].file")?;
            // One file under two spellings (`x`, `./x`, a link to it) would be read twice.
            if let Some(first) =
                crate::io::read::identity(&path).and_then(|id| seen.insert(id, s.file.clone()))
            {
                return Err(Error::Input(format!(
                    "{}: field `shards` lists {:?} and {:?}, which are one file; each shard is listed once",
                    manifest_path.display(),
                    crate::io::short(&first),
                    crate::io::short(&s.file)
                )));
            }
            let bytes = s.examples.checked_mul(rec).ok_or_else(|| {
                Error::Input(format!(
                    "{}: field `examples` of {:?} is {}, more than a file can hold",
                    manifest_path.display(),
                    crate::io::short(&s.file),
                    s.examples
                ))
            })?;
            let map = crate::io::read::map(&path)?;
            if map.len() != bytes {
                return Err(Error::Input(format!(
                    "{}: {} bytes, the manifest says {} examples of {rec} bytes (truncated shard?)",
                    path.display(),
                    map.len(),
                    s.examples
                )));
            }
            starts.push(total);
            // The shards are mapped whole: their sum is bounded by the address space.
            total += s.examples;
            maps.push(map);
        }
        if total != manifest.examples {
            return Err(Error::Input(format!(
                "{}: field `examples` is {}, the shards hold {total}",
                dir.join(MANIFEST).display(),
                manifest.examples
            )));
        }
        check_tokenizer(dir, &manifest)?;
        Ok(Self {
            manifest,
            dir: dir.to_path_buf(),
            maps,
            starts,
        })
    }

    pub fn len(&self) -> usize {
        self.manifest.examples
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Example `i`: its token ids and the length of segment A (with `[CLS]` and `[SEP]`).
    pub fn get(&self, i: usize) -> Example {
        assert!(!self.holds_triples(), "get on a corpus of sentence triples");
        let r = self.record(i);
        let len = u16::from_le_bytes([r[0], r[1]]) as usize;
        let segment_a_len = u16::from_le_bytes([r[2], r[3]]) as usize;
        Example {
            tokens: get_ids(&r[4..], len, self.manifest.token_bytes),
            segment_a_len,
        }
    }

    /// Checks record `i` before it is decoded: its lengths fit the record and every token id
    /// is in the vocabulary. A damaged shard (flipped or zeroed bytes) is then an error naming
    /// its file and record instead of a panic in the embedding gather. One pass over integers.
    pub fn check(&self, i: usize) -> Result<()> {
        let r = self.record(i);
        let (l, tb, vocab) = (
            self.manifest.max_seq_len,
            self.manifest.token_bytes,
            self.manifest.vocab_size,
        );
        let u16_at = |at: usize| u16::from_le_bytes([r[at], r[at + 1]]) as usize;
        // (length, offset of the ids) of each sequence of the record.
        let seqs: Vec<(usize, usize)> = if self.holds_triples() {
            (0..3).map(|k| (u16_at(2 * k), 8 + k * l * tb)).collect()
        } else {
            vec![(u16_at(0), 4)]
        };
        let bad = |what: String| {
            let shard = self.starts.partition_point(|&s| s <= i) - 1;
            Err(Error::Input(format!(
                "{}: record {} ({what}): the shard is damaged; prepare the corpus again",
                self.dir.join(&self.manifest.shards[shard].file).display(),
                i - self.starts[shard]
            )))
        };
        if !self.holds_triples() && u16_at(2) > u16_at(0) {
            return bad(format!(
                "segment A of {} tokens in {}",
                u16_at(2),
                u16_at(0)
            ));
        }
        for (len, at) in seqs {
            // Every example holds at least [CLS] and [SEP]: fewer is a zeroed or cut record.
            if len < 2 {
                return bad(format!("{len} tokens, an empty example"));
            }
            if len > l {
                return bad(format!(
                    "{len} tokens, the corpus's examples have at most {l}"
                ));
            }
            if let Some(id) = get_ids(&r[at..], len, tb)
                .into_iter()
                .find(|&id| id as usize >= vocab)
            {
                return bad(format!("token id {id}, the vocabulary has {vocab}"));
            }
        }
        Ok(())
    }

    /// Whether this corpus holds sentence triples (records read with [`ShardSet::triple`]).
    pub fn holds_triples(&self) -> bool {
        self.manifest.triples.is_some()
    }

    /// Examples `indices` of a corpus of packed examples, each record checked first.
    pub fn examples(&self, indices: &[usize]) -> Result<Vec<Example>> {
        indices
            .iter()
            .map(|&i| self.check(i).map(|()| self.get(i)))
            .collect()
    }

    /// Triples `indices` of a corpus of sentence triples, each record checked first.
    pub fn triples(&self, indices: &[usize]) -> Result<Vec<TripleRecord>> {
        indices
            .iter()
            .map(|&i| self.check(i).map(|()| self.triple(i)))
            .collect()
    }

    /// What its records hold.
    pub fn holds(&self) -> DataKind {
        if self.holds_triples() {
            DataKind::Triples
        } else {
            DataKind::Packed
        }
    }

    fn record(&self, i: usize) -> &[u8] {
        let shard = self.starts.partition_point(|&s| s <= i) - 1;
        let rec = self.manifest.record_size();
        let off = (i - self.starts[shard]) * rec;
        &self.maps[shard][off..off + rec]
    }

    /// Triple `i` of a corpus of sentence triples.
    pub fn triple(&self, i: usize) -> TripleRecord {
        assert!(self.holds_triples(), "triple on a plain corpus");
        let r = self.record(i);
        let (l, tb) = (self.manifest.max_seq_len, self.manifest.token_bytes);
        let len = |k: usize| u16::from_le_bytes([r[2 * k], r[2 * k + 1]]) as usize;
        let ids = |k: usize| get_ids(&r[8 + k * l * tb..], len(k), tb);
        let labels = |k: usize, n: usize| {
            let at = 8 + 3 * l * tb + k * l;
            r[at..at + n].iter().map(|&b| b as i8).collect()
        };
        TripleRecord {
            ori: ids(0),
            syn: ids(1),
            ant: ids(2),
            syn_labels: labels(0, len(1)),
            ant_labels: labels(1, len(2)),
        }
    }
}

/// The folder's `tokenizer.json` is the one the shards were made with.
fn check_tokenizer(dir: &Path, manifest: &Manifest) -> Result<()> {
    let path = dir.join("tokenizer.json");
    if !path.is_present() {
        return Err(Error::missing(
            &path,
            "missing; a prepared folder keeps the tokenizer its shards were made with",
        ));
    }
    let tokenizer = crate::text::WordPieceTokenizer::load(&path)?;
    let found = tokenizer.fingerprint();
    if found != manifest.tokenizer_fingerprint {
        return Err(Error::Input(format!(
            "{}: not the tokenizer the shards were made with (fingerprint {}, the manifest says {}); put the original back or prepare again",
            path.display(),
            &found[..12.min(found.len())],
            &manifest.tokenizer_fingerprint[..12.min(manifest.tokenizer_fingerprint.len())]
        )));
    }
    // The fingerprint names the tokenizer; the manifest's own copies of its facts must agree.
    let (vocab, special) = (tokenizer.vocab_size(), tokenizer.special);
    if manifest.vocab_size != vocab || manifest.special_ids != special {
        return Err(Error::Input(format!(
            "{}: fields `vocab_size` {} / `special_ids` {:?} disagree with its tokenizer.json ({vocab} / {:?}); prepare the corpus again",
            dir.join(MANIFEST).display(),
            manifest.vocab_size,
            manifest.special_ids,
            special
        )));
    }
    Ok(())
}
