//! Packing tokenized documents into ELECTRA-style pre-training examples
//! `[CLS] A [SEP] B [SEP]`, following the rules of google-research/electra's
//! `build_pretraining_dataset.py`:
//! - lines are accumulated until they reach the target length (or the document ends);
//! - with probability 0.1 the example has a single segment, else the first segment aims at
//!   `(target − 3) / 2` tokens; a line goes to A if A is empty, if it fits, or with probability
//!   0.5 when B is still empty and A is below its target;
//! - A is cut to `max_len − 2` tokens and B to what is left after the three special tokens;
//! - after each example the next target length is `max_len`, or with probability 0.05 a random
//!   length in `[5, max_len]`.

use rand::Rng;

/// One packed example: token ids with `[CLS]`/`[SEP]`, and the length of `[CLS] A [SEP]`
/// (segment id 0); the rest, if any, is `B [SEP]` (segment id 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Example {
    pub tokens: Vec<u32>,
    pub segment_a_len: usize,
}

#[derive(Clone, Copy, Debug)]
pub struct PackingConfig {
    pub max_len: usize,
    pub cls: u32,
    pub sep: u32,
    pub single_segment_prob: f64,
    pub short_target_prob: f64,
}

impl PackingConfig {
    pub fn new(max_len: usize, cls: u32, sep: u32) -> Self {
        Self {
            max_len,
            cls,
            sep,
            single_segment_prob: 0.1,
            short_target_prob: 0.05,
        }
    }
}

/// Packs one document (its lines, tokenized) into examples.
pub fn pack_document(lines: &[Vec<u32>], cfg: &PackingConfig, rng: &mut impl Rng) -> Vec<Example> {
    let mut out = Vec::new();
    let mut target = cfg.max_len;
    let mut current: Vec<&[u32]> = Vec::new();
    let mut current_len = 0;
    for line in lines.iter().filter(|l| !l.is_empty()) {
        current.push(line);
        current_len += line.len();
        if current_len >= target {
            out.push(make_example(&current, cfg, rng));
            current.clear();
            current_len = 0;
            target = next_target(cfg, rng);
        }
    }
    if !current.is_empty() {
        out.push(make_example(&current, cfg, rng));
    }
    out
}

fn next_target(cfg: &PackingConfig, rng: &mut impl Rng) -> usize {
    if rng.random::<f64>() < cfg.short_target_prob {
        rng.random_range(5.min(cfg.max_len)..=cfg.max_len)
    } else {
        cfg.max_len
    }
}

fn make_example(sentences: &[&[u32]], cfg: &PackingConfig, rng: &mut impl Rng) -> Example {
    let first_target = if rng.random::<f64>() < cfg.single_segment_prob {
        usize::MAX
    } else {
        cfg.max_len.saturating_sub(3) / 2
    };
    let (mut a, mut b): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    for s in sentences {
        let to_a = a.is_empty()
            || a.len() + s.len() < first_target
            || (b.is_empty() && a.len() < first_target && rng.random::<f64>() < 0.5);
        if to_a {
            a.extend_from_slice(s)
        } else {
            b.extend_from_slice(s)
        }
    }
    a.truncate(cfg.max_len - 2);
    b.truncate(cfg.max_len.saturating_sub(a.len() + 3));
    let mut tokens = Vec::with_capacity(a.len() + b.len() + 3);
    tokens.push(cfg.cls);
    tokens.extend_from_slice(&a);
    tokens.push(cfg.sep);
    let segment_a_len = tokens.len();
    if !b.is_empty() {
        tokens.extend_from_slice(&b);
        tokens.push(cfg.sep);
    }
    Example {
        tokens,
        segment_a_len,
    }
}
