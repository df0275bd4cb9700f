//! Batches from shards: a seeded shuffle per epoch, a resumable position, padding.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::examples::Example;
use super::shards::ShardSet;

/// Host-side batch, row-major [batch, len], padded with `pad` to the longest example.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub batch: usize,
    pub len: usize,
    pub ids: Vec<u32>,
    pub token_types: Vec<u32>,
    pub attention_mask: Vec<u32>,
}

impl Batch {
    pub fn from_examples(examples: &[Example], pad: u32) -> Self {
        let len = examples.iter().map(|e| e.tokens.len()).max().unwrap_or(0);
        Self::padded_to(examples, pad, len)
    }

    /// Like [`Batch::from_examples`], padded to `len` (≥ the longest example).
    pub fn padded_to(examples: &[Example], pad: u32, len: usize) -> Self {
        let batch = examples.len();
        let mut b = Batch {
            batch,
            len,
            ids: vec![pad; batch * len],
            token_types: vec![0; batch * len],
            attention_mask: vec![0; batch * len],
        };
        for (r, e) in examples.iter().enumerate() {
            for (t, &id) in e.tokens.iter().enumerate() {
                b.ids[r * len + t] = id;
                b.attention_mask[r * len + t] = 1;
                b.token_types[r * len + t] = u32::from(t >= e.segment_a_len);
            }
        }
        b
    }

    /// Rows `rows` of the batch (a data-parallel replica's share), at the same length.
    pub fn rows(&self, rows: std::ops::Range<usize>) -> Batch {
        let span = rows.start * self.len..rows.end * self.len;
        Batch {
            batch: rows.len(),
            len: self.len,
            ids: self.ids[span.clone()].to_vec(),
            token_types: self.token_types[span.clone()].to_vec(),
            attention_mask: self.attention_mask[span].to_vec(),
        }
    }

    /// The number of real (not padding) positions.
    pub fn real_tokens(&self) -> usize {
        self.attention_mask.iter().filter(|&&m| m == 1).count()
    }

    /// True when no position is padding (the attention mask can be skipped).
    pub fn is_dense(&self) -> bool {
        self.attention_mask.iter().all(|&m| m == 1)
    }
}

/// Where the data stream stands: epoch and index into that epoch's permutation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataPosition {
    pub epoch: u64,
    pub index: usize,
}

/// An endless, deterministic stream of batches over a [`ShardSet`].
pub struct BatchStream<'a> {
    shards: &'a ShardSet,
    seed: u64,
    batch_size: usize,
    pub position: DataPosition,
    order: Vec<usize>,
}

impl<'a> BatchStream<'a> {
    pub fn new(shards: &'a ShardSet, seed: u64, batch_size: usize, position: DataPosition) -> Self {
        let mut s = Self {
            shards,
            seed,
            batch_size,
            position,
            order: Vec::new(),
        };
        s.shuffle();
        s
    }

    fn shuffle(&mut self) {
        let mut rng = ChaCha8Rng::seed_from_u64(
            self.seed ^ (self.position.epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        );
        self.order = (0..self.shards.len()).collect();
        self.order.shuffle(&mut rng);
    }

    /// The corpus it reads.
    pub fn shards(&self) -> &'a ShardSet {
        self.shards
    }

    /// The example indices of the next batch (wrapping into a new, reshuffled epoch when one
    /// runs out).
    pub fn next_indices(&mut self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.batch_size);
        while out.len() < self.batch_size {
            if self.position.index >= self.order.len() {
                self.position = DataPosition {
                    epoch: self.position.epoch + 1,
                    index: 0,
                };
                self.shuffle();
            }
            out.push(self.order[self.position.index]);
            self.position.index += 1;
        }
        out
    }

    /// The next batch of a plain corpus (each record checked: [`ShardSet::check`]).
    pub fn next_batch(&mut self) -> crate::Result<Batch> {
        let examples = self.shards.examples(&self.next_indices())?;
        Ok(Batch::from_examples(
            &examples,
            self.shards.manifest.special_ids.pad,
        ))
    }
}
