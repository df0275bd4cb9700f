//! A sentence or a sentence pair as a classifier reads it: `[CLS] a [SEP] (b [SEP])` with
//! segment ids, cut to the model's length by the rule of the recipe's reference code.

use serde::{Deserialize, Serialize};

use super::WordPieceTokenizer;

/// How a sentence pair longer than the model takes is cut. The two rules keep the same tokens
/// except when both texts are longer than half the room and the room is odd: then the extra
/// token goes to `a` (greedy) or to the longer text, `b` on ties (longest first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Truncation {
    /// BERT's and ELECTRA's `_truncate_seq_pair`: one token at a time off the end of the longer
    /// text, off `b` when both are as long.
    #[default]
    Greedy,
    /// transformers' `truncation="longest_first"` (the tokenizers library): the shorter text
    /// (`a` on ties) keeps min(its length, room / 2) tokens, the longer the rest.
    LongestFirst,
}

impl Truncation {
    /// The lengths `a` and `b` (of `na` and `nb` tokens) keep in `room` tokens.
    pub fn lengths(self, na: usize, nb: usize, room: usize) -> (usize, usize) {
        if na + nb <= room {
            return (na, nb);
        }
        match self {
            Self::Greedy => {
                let (mut a, mut b) = (na, nb);
                while a + b > room {
                    if a > b { a -= 1 } else { b -= 1 }
                }
                (a, b)
            }
            Self::LongestFirst if na <= nb => {
                let a = na.min(room / 2);
                (a, room - a)
            }
            Self::LongestFirst => {
                let b = nb.min(room / 2);
                (room - b, b)
            }
        }
    }
}

/// Token ids and segment ids of `[CLS] a [SEP] (b [SEP])`, cut to `max_len` by `rule`.
pub fn encode_pair(
    t: &WordPieceTokenizer,
    a: &str,
    b: Option<&str>,
    max_len: usize,
    rule: Truncation,
) -> (Vec<u32>, Vec<u32>) {
    let mut ta = t.encode(a);
    let mut tb = b.map(|b| t.encode(b)).unwrap_or_default();
    let room = max_len.saturating_sub(if b.is_some() { 3 } else { 2 });
    let (na, nb) = rule.lengths(ta.len(), tb.len(), room);
    ta.truncate(na);
    tb.truncate(nb);
    let s = t.special;
    let mut ids = vec![s.cls];
    ids.extend(&ta);
    ids.push(s.sep);
    let mut types = vec![0; ids.len()];
    if b.is_some() {
        ids.extend(&tb);
        ids.push(s.sep);
        types.resize(ids.len(), 1);
    }
    (ids, types)
}
