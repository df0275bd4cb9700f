//! Hard Correction (Zhang et al., AAAI 2023, §3.2).
//!
//! At a masked position k with gold token `y_k` and prediction `p_k` (the argmax of the MLM
//! logits by default, or the generator's sample), the position is *corrected* when
//! `p_k ≠ y_k` and `p_k ∈ V[y_k]` (the synonym table, symmetric). Corrected positions get weight
//! `I_k = 0` in `L_cor = −Σ_k I_k · log p(y_k | s') / Σ_k I_k` — they leave the loss and its
//! normaliser (see [`super::mlm`]).
//!
//! Multi-piece extension (`multi_piece`, off by default): when a whole word is split into
//! several WordPieces that are all masked, the word counts as corrected when the predictions at
//! its pieces, joined, spell a synonym of the gold word; every piece of it is then dropped.
//!
//! On ELECTRA's discriminator (our extension, `hc_discriminator`): a sampled replacement that is
//! a synonym of the original is labelled "original" (`relabel`) or leaves `L_D` (`ignore`).
//!
//! Config keys: `hc_prediction`, `hc_discriminator`, `hc_multi_piece`, `lexicon` (a `lexicon
//! build` table; unset: the WordNet table of the run's tokenizer, built once into
//! `<run>/lexicon.safetensors`). Logged per window: `mismatched`, `corrected`,
//! `corrected_ratio` (prediction level) and `sequences_corrected_ratio` (iteration level).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use burn::prelude::*;
use burn::tensor::IndexingUpdateOp;
use serde::{Deserialize, Serialize};

use super::{Counters, DeviceCounters, MlmStep, ObjectiveConfig, Part, Setup};
use crate::Result;
use crate::lexicon::WordNet;
use crate::text::default_corpus::default_wordnet_dir;
use crate::text::shards::ShardSet;
use crate::text::synonym_table::wordnet_table_from;
use crate::text::{SynonymTable, WordPieceTokenizer};

/// The part's name in [`super::ObjectiveKind`]'s registry.
pub const NAME: &str = "hc";

/// The window counts it logs: masked predictions that differ from the gold token, and those it
/// corrected (dropped from the loss).
pub const MISMATCHED: &str = "mismatched";
pub const CORRECTED: &str = "corrected";

/// HC on ELECTRA's discriminator: a sampled replacement that is a synonym of the original is
/// labelled "original" (`relabel`) or left out of L_D (`ignore`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiscriminatorCorrection {
    #[default]
    Off,
    Relabel,
    Ignore,
}

/// Hard Correction's keys of the `[objective]` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HcConfig {
    /// HC compares the gold token with the argmax (paper) or the generator's sample.
    pub hc_prediction: Prediction,
    pub hc_discriminator: DiscriminatorCorrection,
    /// Count multi-piece words whose predicted pieces spell a synonym (extension, off).
    pub hc_multi_piece: bool,
    /// Synonym table file (`trueneg lexicon build`); unset = WordNet table built for the run.
    pub lexicon: Option<PathBuf>,
}

/// The part: the synonym table (and the multi-piece rule's vocabulary) of the run.
pub struct HardCorrection {
    /// Correct `L_mlm` (the kind includes HC); else only the discriminator's labels.
    mlm: bool,
    prediction: Prediction,
    discriminator: DiscriminatorCorrection,
    table: SynonymTable,
    /// The table on each device the step has run on ([`padded_table`]).
    on_device: Mutex<Vec<(Device, Tensor<2, Int>)>>,
    multi_piece: Option<MultiPiece>,
}

/// The part when `cfg` uses it: HC in the kind, or `hc_discriminator` on.
pub fn build(cfg: &ObjectiveConfig, setup: &mut Setup) -> Result<Option<Box<dyn Part>>> {
    let c = &cfg.hc;
    let mlm = cfg.kind.has(NAME);
    if !mlm && c.hc_discriminator == DiscriminatorCorrection::Off {
        return Ok(None);
    }
    // The run's tokenizer and WordNet, opened at most once for the table and the multi-piece
    // rule.
    let mut opened = None;
    let table = match setup.synonyms.take() {
        Some(t) => t,
        None => synonym_table(c, setup, &mut opened)?,
    };
    let multi_piece = if c.hc_multi_piece {
        let (tokenizer, wordnet) = match opened.take() {
            Some(o) => o,
            None => tokenizer_and_wordnet(setup)?,
        };
        Some(MultiPiece::new(&tokenizer, wordnet))
    } else {
        None
    };
    Ok(Some(Box::new(HardCorrection {
        mlm,
        prediction: c.hc_prediction,
        discriminator: c.hc_discriminator,
        table,
        on_device: Mutex::new(Vec::new()),
        multi_piece,
    })))
}

/// The run's shards, which the table and the multi-piece rule are made for.
fn shards<'a>(setup: &Setup<'a>) -> Result<&'a ShardSet> {
    setup
        .shards
        .ok_or_else(|| super::missing(NAME, "the run's shards (their tokenizer)"))
}

/// The tokenizer of the run's shards and WordNet (Debian's `wordnet-base` or `WNHOME`).
fn tokenizer_and_wordnet(setup: &Setup) -> Result<(WordPieceTokenizer, WordNet)> {
    let tokenizer = crate::text::prepare::shard_tokenizer(&shards(setup)?.dir)?;
    let wordnet = WordNet::open(&default_wordnet_dir())?;
    Ok((tokenizer, wordnet))
}

/// `lexicon`, else the WordNet table of the run's tokenizer, built once into
/// `<run>/lexicon.safetensors` (building it opens the tokenizer and WordNet into `opened`).
fn synonym_table(
    c: &HcConfig,
    setup: &Setup,
    opened: &mut Option<(WordPieceTokenizer, WordNet)>,
) -> Result<SynonymTable> {
    let fp = &shards(setup)?.manifest.tokenizer_fingerprint;
    if let Some(p) = &c.lexicon {
        return SynonymTable::load_for(p, fp);
    }
    let run = setup
        .run
        .ok_or_else(|| super::missing(NAME, "a run folder for its WordNet table"))?;
    let path = run.join("lexicon.safetensors");
    if path.exists() {
        return SynonymTable::load_for(&path, fp);
    }
    let (tokenizer, wordnet) = opened.insert(tokenizer_and_wordnet(setup)?);
    let table = wordnet_table_from(tokenizer, wordnet, &default_wordnet_dir());
    if !setup.read_only {
        table.save(&path)?;
    }
    Ok(table)
}

impl HardCorrection {
    /// The synonym table on `s`'s device, padded to the model's vocabulary (built once).
    fn device_table(&self, s: &MlmStep) -> Tensor<2, Int> {
        let mut cached = self.on_device.lock().expect("table cache");
        if let Some((_, t)) = cached.iter().find(|(d, _)| d == s.device) {
            return t.clone();
        }
        let rows = s.words.dims()[0].max(self.table.vocab_size());
        let t = padded_table(&self.table, rows, s.device);
        cached.push((s.device.clone(), t.clone()));
        t
    }

    /// The weights and counts by the multi-piece rule, which spells words on the host: it
    /// reads the predictions (the one part of the step that does).
    fn host_weights(&self, s: &MlmStep, mp: &MultiPiece) -> (Tensor<1>, DeviceCounters) {
        let sampled;
        let pred = match (self.prediction, &s.sampled) {
            (Prediction::Sampled, Some(x)) => {
                sampled = crate::kernels::host_ids(x.clone());
                &sampled[..]
            }
            _ => s.argmax_host(),
        };
        let labels = &s.masked.labels;
        let (mut w, mut c) = correction_weights(pred, labels, &s.rows, s.batch.batch, &self.table);
        let words = mp.masked_words(&s.batch.ids, s.batch.len, &s.masked.positions);
        c.corrected += mp.correct(&words, pred, labels, &mut w);
        let mut hit = vec![false; s.batch.batch];
        for (k, &wk) in w.iter().enumerate() {
            hit[s.rows[k]] |= wk == 0.0;
        }
        c.sequences_corrected = hit.iter().filter(|&&h| h).count();
        let n = w.len();
        let counts = [
            (MISMATCHED, c.mismatched),
            (CORRECTED, c.corrected),
            ("sequences", c.sequences),
            ("sequences_corrected", c.sequences_corrected),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), count(v, s.device)))
        .collect();
        (Tensor::from_data(TensorData::new(w, [n]), s.device), counts)
    }
}

/// A count known on the host as a [1] tensor on `device`: filled there, not uploaded (a
/// recorded step uploads nothing).
fn count(v: usize, device: &Device) -> Tensor<1, Int> {
    Tensor::full([1], v as i64, device)
}

/// The synonym lists of `table` as a `[rows, K]` id matrix on `device` (K the longest list, at
/// least 1), each row padded with −1, which matches no token.
pub fn padded_table(table: &SynonymTable, rows: usize, device: &Device) -> Tensor<2, Int> {
    let k = (0..table.vocab_size())
        .map(|i| table.synonyms(i as u32).len())
        .max()
        .unwrap_or(0)
        .max(1);
    let mut ids = vec![-1i64; rows * k];
    for i in 0..table.vocab_size().min(rows) {
        for (j, &x) in table.synonyms(i as u32).iter().enumerate() {
            ids[i * k + j] = x as i64;
        }
    }
    Tensor::from_data(TensorData::new(ids, [rows, k]), device)
}

/// Whether `b[i]` differs from `a[i]` and is one of its synonyms in `table` (a
/// [`padded_table`]), on the device: [n].
pub fn synonyms_on_device(
    table: Tensor<2, Int>,
    a: Tensor<1, Int>,
    b: Tensor<1, Int>,
) -> Tensor<1, Bool> {
    let [n] = a.dims();
    let [_, k] = table.dims();
    let listed = table
        .select(0, a.clone())
        .equal(b.clone().reshape([n, 1]).expand([n, k]))
        .any_dim(1)
        .reshape([n]);
    listed.bool_and(a.not_equal(b))
}

impl Part for HardCorrection {
    fn mlm_weights(&self, s: &MlmStep) -> Option<(Tensor<1>, DeviceCounters)> {
        if !self.mlm {
            return None;
        }
        if let Some(mp) = &self.multi_piece {
            return Some(self.host_weights(s, mp));
        }
        let pred = match (self.prediction, &s.sampled) {
            (Prediction::Sampled, Some(x)) => x.clone(),
            _ => s.argmax.clone(),
        };
        let mismatched = pred.clone().not_equal(s.labels.clone());
        let corrected = synonyms_on_device(self.device_table(s), s.labels.clone(), pred);
        let per_row = Tensor::<1, Int>::zeros([s.batch.batch], s.device).select_assign(
            0,
            s.rows_on_device(),
            corrected.clone().int(),
            IndexingUpdateOp::Add,
        );
        let counts = vec![
            (MISMATCHED.to_string(), mismatched.int().sum()),
            (CORRECTED.to_string(), corrected.clone().int().sum()),
            ("sequences".to_string(), count(s.batch.batch, s.device)),
            (
                "sequences_corrected".to_string(),
                per_row.greater_elem(0).int().sum(),
            ),
        ];
        Some((corrected.bool_not().float(), counts))
    }

    fn discriminator_labels(
        &self,
        s: &MlmStep,
        sampled: &Tensor<1, Int>,
        replaced: Tensor<1, Int>,
        weights: Tensor<1, Int>,
    ) -> (Tensor<1, Int>, Tensor<1, Int>) {
        if self.discriminator == DiscriminatorCorrection::Off {
            return (replaced, weights);
        }
        let synonym = synonyms_on_device(self.device_table(s), s.labels.clone(), sampled.clone());
        match self.discriminator {
            DiscriminatorCorrection::Relabel => (replaced.mask_fill(synonym, 0), weights),
            DiscriminatorCorrection::Ignore => (replaced, weights.mask_fill(synonym, 0)),
            DiscriminatorCorrection::Off => (replaced, weights),
        }
    }

    fn drops_discriminator_tokens(&self) -> bool {
        self.discriminator == DiscriminatorCorrection::Ignore
    }

    fn progress(&self, c: &Counters) -> Option<String> {
        let (mismatched, corrected) = (*c.get(MISMATCHED)?, c.get(CORRECTED).copied()?);
        Some(format!("hc corrected {corrected}/{mismatched}"))
    }

    fn window_metrics(&self, c: &Counters, out: &mut BTreeMap<String, serde_json::Value>) {
        let Some(&mismatched) = c.get(MISMATCHED) else {
            return;
        };
        let get = |k: &str| c.get(k).copied().unwrap_or(0);
        let (corrected, sequences) = (get(CORRECTED), get("sequences"));
        out.insert(MISMATCHED.into(), mismatched.into());
        out.insert(CORRECTED.into(), corrected.into());
        out.insert(
            "corrected_ratio".into(),
            (corrected as f64 / mismatched.max(1) as f64).into(),
        );
        out.insert(
            "sequences_corrected_ratio".into(),
            (get("sequences_corrected") as f64 / sequences.max(1) as f64).into(),
        );
    }
}

/// Below this share of the mismatched predictions corrected, Hard Correction has in effect done
/// nothing (0.01 %; the paper's Table 8 reports 1–2 % at 1M steps).
pub const FEW_CORRECTIONS: f64 = 1e-4;

/// A note when Hard Correction corrected (almost) nothing of `mismatched` predictions, with
/// the usual reason, so that a small run is not read as a broken objective.
/// `predictor` names what predicts the masked tokens: ELECTRA's generator, or BERT's masked-LM
/// model.
pub fn few_corrections_note(mismatched: u64, corrected: u64, predictor: &str) -> Option<String> {
    let share = corrected as f64 / mismatched.max(1) as f64;
    (mismatched > 0 && share < FEW_CORRECTIONS).then(|| {
        format!(
            "Hard Correction corrected {corrected} of {mismatched} mismatched predictions ({:.3} %, under {} %): a {predictor} this early or this small predicts mostly function words and punctuation, which have no WordNet synonyms; corrections come once it predicts content words (the paper's Table 8, measured on runs continued for 200k steps: 1–2 % of mismatches). `trueneg stats` on later checkpoints shows the rate; `lexicon build` prints the table's coverage",
            100.0 * share,
            100.0 * FEW_CORRECTIONS
        )
    })
}

/// Which prediction Hard Correction compares with the gold token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Prediction {
    #[default]
    Argmax,
    /// The generator's sample (also spelt `sample`).
    #[serde(alias = "sample")]
    Sampled,
}

/// Counts of one batch, for the statistics in `metrics.jsonl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrectionCounts {
    pub masked: usize,
    /// Masked positions whose prediction differs from the gold token.
    pub mismatched: usize,
    /// Mismatched positions whose prediction is a synonym of the gold token.
    pub corrected: usize,
    pub sequences: usize,
    /// Sequences with at least one corrected position.
    pub sequences_corrected: usize,
}

impl CorrectionCounts {
    pub fn add(&mut self, o: &CorrectionCounts) {
        self.masked += o.masked;
        self.mismatched += o.mismatched;
        self.corrected += o.corrected;
        self.sequences += o.sequences;
        self.sequences_corrected += o.sequences_corrected;
    }
}

/// Per masked position the weight `I_k` (1 = keep, 0 = corrected), and the counts.
/// `rows[k]` is the sequence of position k; `batch` the number of sequences.
pub fn correction_weights(
    predicted: &[u32],
    gold: &[u32],
    rows: &[usize],
    batch: usize,
    table: &SynonymTable,
) -> (Vec<f32>, CorrectionCounts) {
    let mut weights = vec![1.0; gold.len()];
    let mut c = CorrectionCounts {
        masked: gold.len(),
        sequences: batch,
        ..Default::default()
    };
    let mut hit = vec![false; batch];
    for k in 0..gold.len() {
        if predicted[k] != gold[k] {
            c.mismatched += 1;
            if table.are_synonyms(gold[k], predicted[k]) {
                c.corrected += 1;
                weights[k] = 0.0;
                hit[rows[k]] = true;
            }
        }
    }
    c.sequences_corrected = hit.iter().filter(|&&h| h).count();
    (weights, c)
}

/// Word → its synonyms (WordNet), for words the vocabulary splits into pieces.
pub type WordSynonyms = Box<dyn Fn(&str) -> Vec<String> + Send + Sync>;

/// What the multi-piece rule needs: the vocabulary's token strings and word-level synonyms.
pub struct MultiPiece {
    pub tokens: Vec<String>,
    pub synonyms: WordSynonyms,
}

impl MultiPiece {
    /// The rule for `tokenizer`'s vocabulary, with `wordnet`'s synonyms.
    pub fn new(tokenizer: &WordPieceTokenizer, wordnet: WordNet) -> Self {
        let mut tokens = vec![String::new(); tokenizer.vocab_size()];
        for (t, id) in tokenizer.inner.get_vocab(true) {
            if let Some(slot) = tokens.get_mut(id as usize) {
                *slot = t;
            }
        }
        Self {
            tokens,
            synonyms: Box::new(move |w| wordnet.synonyms(w).into_iter().collect()),
        }
    }

    /// Joins WordPiece tokens into a word (`##` pieces glued to the previous one).
    pub fn spell(&self, ids: &[u32]) -> String {
        ids.iter()
            .map(|&i| {
                let t = self
                    .tokens
                    .get(i as usize)
                    .map(String::as_str)
                    .unwrap_or("");
                t.strip_prefix("##").unwrap_or(t)
            })
            .collect()
    }

    fn is_piece(&self, id: u32) -> bool {
        self.tokens
            .get(id as usize)
            .is_some_and(|t| t.starts_with("##"))
    }

    /// Whole words split into several pieces, all of them masked: per word the indices into the
    /// masked positions. `ids` are the original batch ids, `len` the row length, `positions`
    /// the sorted flat masked positions.
    pub fn masked_words(&self, ids: &[u32], len: usize, positions: &[usize]) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        let mut k = 0;
        while k < positions.len() {
            let p = positions[k];
            let mut word = vec![k];
            if !self.is_piece(ids[p]) {
                while k + word.len() < positions.len() {
                    let q = positions[k + word.len()];
                    let prev = positions[k + word.len() - 1];
                    if q == prev + 1 && !q.is_multiple_of(len) && self.is_piece(ids[q]) {
                        word.push(k + word.len());
                    } else {
                        break;
                    }
                }
                let after = positions[k + word.len() - 1] + 1;
                let complete =
                    after.is_multiple_of(len) || after >= ids.len() || !self.is_piece(ids[after]);
                if word.len() > 1 && complete {
                    out.push(word.clone());
                }
            }
            k += word.len();
        }
        out
    }

    /// Applies the rule: a masked multi-piece word whose predicted pieces spell a synonym of it
    /// is corrected (all its pieces get weight 0). Returns how many positions were added.
    pub fn correct(
        &self,
        words: &[Vec<usize>],
        predicted: &[u32],
        gold: &[u32],
        weights: &mut [f32],
    ) -> usize {
        let mut extra = 0;
        for pieces in words {
            let pred: Vec<u32> = pieces.iter().map(|&k| predicted[k]).collect();
            let gold_ids: Vec<u32> = pieces.iter().map(|&k| gold[k]).collect();
            if pred == gold_ids {
                continue;
            }
            let (p, g) = (self.spell(&pred), self.spell(&gold_ids));
            if (self.synonyms)(&g).contains(&p) {
                for &k in pieces {
                    if weights[k] != 0.0 {
                        weights[k] = 0.0;
                        extra += 1;
                    }
                }
            }
        }
        extra
    }
}
