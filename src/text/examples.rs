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
    let mut packer = Packer::new(*cfg, rng);
    let mut out: Vec<Example> = lines
        .iter()
        .filter_map(|l| packer.push(l.clone()))
        .collect();
    out.extend(packer.finish());
    out
}

/// [`pack_document`] one sentence at a time: a document of any length is packed holding only
/// the sentences of the example being built. The examples are those `pack_document` makes.
pub struct Packer<R: Rng> {
    cfg: PackingConfig,
    rng: R,
    target: usize,
    current: Vec<Vec<u32>>,
    current_len: usize,
}

impl<R: Rng> Packer<R> {
    pub fn new(cfg: PackingConfig, rng: R) -> Self {
        Self {
            cfg,
            rng,
            target: cfg.max_len,
            current: Vec::new(),
            current_len: 0,
        }
    }

    /// Adds the document's next sentence; returns the example it completes, if any. An empty
    /// sentence is skipped.
    pub fn push(&mut self, sentence: Vec<u32>) -> Option<Example> {
        if sentence.is_empty() {
            return None;
        }
        self.current_len += sentence.len();
        self.current.push(sentence);
        if self.current_len < self.target {
            return None;
        }
        let ex = self.take();
        self.target = next_target(&self.cfg, &mut self.rng);
        Some(ex)
    }

    /// The document's last example, from the sentences not yet packed.
    pub fn finish(mut self) -> Option<Example> {
        (!self.current.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> Example {
        let parts: Vec<&[u32]> = self.current.iter().map(Vec::as_slice).collect();
        let ex = make_example(&parts, &self.cfg, &mut self.rng);
        self.current.clear();
        self.current_len = 0;
        ex
    }
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
