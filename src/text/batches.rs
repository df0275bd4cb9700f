//! Batches from shards: a seeded shuffle per epoch, a resumable position, padding.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::examples::Example;
use super::shards::{ClineRecord, ShardSet};

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

    /// The example indices of the next batch (wrapping into a new, reshuffled epoch when one
    /// runs out).
    fn next_indices(&mut self) -> Vec<usize> {
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
        let examples = self
            .next_indices()
            .into_iter()
            .map(|i| self.shards.check(i).map(|()| self.shards.get(i)))
            .collect::<crate::Result<Vec<Example>>>()?;
        Ok(Batch::from_examples(
            &examples,
            self.shards.manifest.special_ids.pad,
        ))
    }

    /// The next batch of a CLINE corpus (each record checked).
    pub fn next_cline_batch(&mut self) -> crate::Result<ClineBatch> {
        let records = self
            .next_indices()
            .into_iter()
            .map(|i| self.shards.check(i).map(|()| self.shards.get_cline(i)))
            .collect::<crate::Result<Vec<ClineRecord>>>()?;
        Ok(ClineBatch::new(
            &records,
            self.shards.manifest.special_ids.pad,
        ))
    }
}

/// A CLINE batch: x_ori, x_syn and x_ant of the same sentences, all padded to one length.
#[derive(Clone, Debug, PartialEq)]
pub struct ClineBatch {
    pub ori: Batch,
    pub syn: Batch,
    pub ant: Batch,
    /// Detection labels of the x_syn rows then the x_ant rows, [2 · batch, len]: 0 / 1 / 2,
    /// −100 on special tokens, non-candidates and padding.
    pub labels: Vec<i64>,
}

impl ClineBatch {
    /// Triples `rows` of the batch (a data-parallel replica's share), at the same length.
    pub fn rows(&self, rows: std::ops::Range<usize>) -> ClineBatch {
        let (n, len) = (self.ori.batch, self.ori.len);
        let labels =
            |from: usize| self.labels[(from + rows.start) * len..(from + rows.end) * len].to_vec();
        ClineBatch {
            ori: self.ori.rows(rows.clone()),
            syn: self.syn.rows(rows.clone()),
            ant: self.ant.rows(rows.clone()),
            labels: [labels(0), labels(n)].concat(),
        }
    }

    pub fn new(records: &[ClineRecord], pad: u32) -> Self {
        let len = records
            .iter()
            .flat_map(|r| [r.ori.len(), r.syn.len(), r.ant.len()])
            .max()
            .unwrap_or(0);
        let side = |f: fn(&ClineRecord) -> &Vec<u32>| {
            let ex: Vec<Example> = records
                .iter()
                .map(|r| Example {
                    tokens: f(r).clone(),
                    segment_a_len: f(r).len(),
                })
                .collect();
            Batch::padded_to(&ex, pad, len)
        };
        let mut labels = vec![-100i64; 2 * records.len() * len];
        let rows = records.iter().map(|r| &r.syn_labels);
        for (row, lab) in rows
            .chain(records.iter().map(|r| &r.ant_labels))
            .enumerate()
        {
            for (t, &l) in lab.iter().enumerate() {
                labels[row * len + t] = l as i64;
            }
        }
        Self {
            ori: side(|r| &r.ori),
            syn: side(|r| &r.syn),
            ant: side(|r| &r.ant),
            labels,
        }
    }
}
