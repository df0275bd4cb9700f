//! Memory-mapped example shards and their manifest.
//!
//! A shard is a flat file of fixed-size records, one per example:
//! `[length: u16 LE][segment_a_len: u16 LE][max_seq_len token ids, u16 or u32 LE, 0-padded]`,
//! so example i of a shard starts at `i * record_size` and is read without parsing.
//! `manifest.json` records the layout, the tokenizer fingerprint and the counts.

use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde::{Deserialize, Serialize};

use super::examples::Example;
use super::tokenizer::SpecialIds;
use crate::{Error, Result};

pub const MANIFEST: &str = "manifest.json";
pub const FORMAT_VERSION: u32 = 1;

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
}

impl Manifest {
    pub fn record_size(&self) -> usize {
        4 + self.max_seq_len * self.token_bytes
    }

    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST);
        let bytes = crate::error::read(&path)?;
        let m: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Input(format!("{}: invalid manifest ({e})", path.display())))?;
        if m.format_version != FORMAT_VERSION {
            return Err(Error::Input(format!(
                "{}: field `format_version` is {}, this trueneg reads {FORMAT_VERSION}",
                path.display(),
                m.format_version
            )));
        }
        Ok(m)
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
        for (i, &t) in ex.tokens.iter().enumerate() {
            let at = 4 + i * token_bytes;
            if token_bytes == 2 {
                chunk[at..at + 2].copy_from_slice(&(t as u16).to_le_bytes());
            } else {
                chunk[at..at + 4].copy_from_slice(&t.to_le_bytes());
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
    pub fn open(dir: &Path) -> Result<Self> {
        let manifest = Manifest::read(dir)?;
        let rec = manifest.record_size();
        let mut maps = Vec::new();
        let mut starts = Vec::new();
        let mut total = 0;
        for s in &manifest.shards {
            let path = dir.join(&s.file);
            let f = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
            // SAFETY: shards are written once (temp file + rename) and never modified in place.
            let map = unsafe { Mmap::map(&f) }.map_err(|e| Error::io(&path, e))?;
            if map.len() != s.examples * rec {
                return Err(Error::Input(format!(
                    "{}: {} bytes, the manifest says {} examples of {rec} bytes (truncated shard?)",
                    path.display(),
                    map.len(),
                    s.examples
                )));
            }
            starts.push(total);
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
        let shard = self.starts.partition_point(|&s| s <= i) - 1;
        let rec = self.manifest.record_size();
        let off = (i - self.starts[shard]) * rec;
        let r = &self.maps[shard][off..off + rec];
        let len = u16::from_le_bytes([r[0], r[1]]) as usize;
        let segment_a_len = u16::from_le_bytes([r[2], r[3]]) as usize;
        let tb = self.manifest.token_bytes;
        let tokens = (0..len)
            .map(|k| {
                let at = 4 + k * tb;
                if tb == 2 {
                    u16::from_le_bytes([r[at], r[at + 1]]) as u32
                } else {
                    u32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]])
                }
            })
            .collect();
        Example {
            tokens,
            segment_a_len,
        }
    }
}
