//! A batch of sentence triples read from a corpus of `prepare --triples`.

use crate::text::batches::Batch;
use crate::text::examples::Example;
use crate::text::shards::TripleRecord;

/// A batch of sentence triples: x_ori, x_syn and x_ant of the same sentences, all padded to
/// one length.
#[derive(Clone, Debug, PartialEq)]
pub struct TripleBatch {
    pub ori: Batch,
    pub syn: Batch,
    pub ant: Batch,
    /// Detection labels of the x_syn rows then the x_ant rows, [2 · batch, len]: 0 / 1 / 2,
    /// −100 on special tokens, non-candidates and padding.
    pub labels: Vec<i64>,
}

impl TripleBatch {
    /// Triples `rows` of the batch (a data-parallel replica's share), at the same length.
    pub fn rows(&self, rows: std::ops::Range<usize>) -> TripleBatch {
        let (n, len) = (self.ori.batch, self.ori.len);
        let labels =
            |from: usize| self.labels[(from + rows.start) * len..(from + rows.end) * len].to_vec();
        TripleBatch {
            ori: self.ori.rows(rows.clone()),
            syn: self.syn.rows(rows.clone()),
            ant: self.ant.rows(rows.clone()),
            labels: [labels(0), labels(n)].concat(),
        }
    }

    pub fn new(records: &[TripleRecord], pad: u32) -> Self {
        let len = records
            .iter()
            .flat_map(|r| [r.ori.len(), r.syn.len(), r.ant.len()])
            .max()
            .unwrap_or(0);
        let side = |f: fn(&TripleRecord) -> &Vec<u32>| {
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
