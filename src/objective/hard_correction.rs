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

use crate::io::PathQuery;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::prelude::*;
use burn::tensor::IndexingUpdateOp;
use serde::{Deserialize, Serialize};

use super::{
    Between, BetweenSteps, Counters, DeviceCounters, MlmStep, ObjectiveConfig, Part, Record, Setup,
};
use crate::Result;
use crate::frame::FileKind;
use crate::lexicon::WordNet;
use crate::text::default_corpus::default_wordnet_dir;
use crate::text::multi_piece::MultiPiece;
use crate::text::self_synonyms::{Refresh, SelfSynonyms, read_stop_words};
pub use crate::text::self_synonyms::{SELF_MIN_PRECISION, SelfWords};
use crate::text::shards::ShardSet;
use crate::text::shared_table::SharedTable;
use crate::text::synonym_table::{IN_CHECKPOINT, wordnet_table_from};
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HcConfig {
    /// HC compares the gold token with the argmax (paper) or the generator's sample.
    pub hc_prediction: Prediction,
    pub hc_discriminator: DiscriminatorCorrection,
    /// Count multi-piece words whose predicted pieces spell a synonym (extension, off).
    pub hc_multi_piece: bool,
    /// Synonym table file (`trueneg lexicon build`); unset = WordNet table built for the run.
    pub lexicon: Option<PathBuf>,
    /// `table`: `lexicon`, else WordNet's, all run long; `self`: rebuilt from the model's own
    /// input embeddings every `hc_refresh_every` steps (trueneg's extension).
    pub hc_source: TableSource,
    pub hc_refresh_every: u64,
    /// The self table: neighbours kept per word, their least cosine, words left out.
    pub hc_self_k: usize,
    pub hc_self_min_cosine: f64,
    pub hc_self_stop_words: Option<PathBuf>,
    /// The words the self table is defined on: `content` (no function words, only words WordNet
    /// knows) or `all` (every whole word, function words included: for tests and ablations).
    pub hc_self_words: SelfWords,
    /// The self table before the first refresh: `table` (as `hc_source = "table"`) or `none`.
    pub hc_self_initial: InitialTable,
    /// The quality gate: a rebuilt self table is used only when at least this share of its
    /// pairs are WordNet synonyms (0: always used); until one passes, the initial table stays.
    pub hc_self_min_precision: f64,
    /// Corrected predictions shown (TensorBoard text, `metrics.jsonl`) every this many logged
    /// lines (0: never), at most `hc_samples` of them.
    pub hc_samples_every: u64,
    pub hc_samples: usize,
}

impl Default for HcConfig {
    fn default() -> Self {
        Self {
            hc_prediction: Prediction::default(),
            hc_discriminator: DiscriminatorCorrection::default(),
            hc_multi_piece: false,
            lexicon: None,
            hc_source: TableSource::Table,
            hc_refresh_every: 1000,
            hc_self_k: 5,
            hc_self_min_cosine: 0.5,
            hc_self_stop_words: None,
            hc_self_words: SelfWords::Content,
            hc_self_initial: InitialTable::Table,
            hc_self_min_precision: SELF_MIN_PRECISION,
            hc_samples_every: 10,
            hc_samples: 16,
        }
    }
}

/// Where Hard Correction's synonym table comes from (`hc_source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableSource {
    Table,
    #[serde(rename = "self")]
    SelfTable,
}

/// The self table before its first refresh (`hc_self_initial`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InitialTable {
    Table,
    None,
}

impl super::PartConfig for HcConfig {
    /// `Err((field, value, rule))` for the first bad value.
    fn validate(&self) -> std::result::Result<(), super::BadValue> {
        let bad = |f: &str, v: String, rule: &str| Err((format!("objective.{f}"), v, rule.into()));
        if self.hc_source == TableSource::SelfTable && self.hc_refresh_every == 0 {
            return bad(
                "hc_refresh_every",
                "0".into(),
                "must be >= 1 with hc_source = \"self\"",
            );
        }
        if self.hc_self_k == 0 {
            return bad("hc_self_k", "0".into(), "must be >= 1");
        }
        let c = self.hc_self_min_cosine;
        if !(-1.0..=1.0).contains(&c) {
            return bad("hc_self_min_cosine", c.to_string(), "must be in [-1, 1]");
        }
        let p = self.hc_self_min_precision;
        if !(0.0..=1.0).contains(&p) {
            return bad("hc_self_min_precision", p.to_string(), "must be in [0, 1]");
        }
        Ok(())
    }

    fn counts_corrections() -> bool {
        true
    }

    fn files_mut(&mut self) -> Vec<(&'static str, &mut Option<PathBuf>, FileKind)> {
        vec![
            ("objective.lexicon", &mut self.lexicon, FileKind::Lexicon),
            (
                "objective.hc_self_stop_words",
                &mut self.hc_self_stop_words,
                FileKind::StopWords,
            ),
        ]
    }
}

/// The part: the synonym table (and the multi-piece rule's vocabulary) of the run.
pub struct HardCorrection {
    /// Correct `L_mlm` (the kind includes HC); else only the discriminator's labels.
    mlm: bool,
    prediction: Prediction,
    discriminator: DiscriminatorCorrection,
    table: SharedTable,
    /// `hc_source = "self"`: how the table is rebuilt.
    refresh: Option<Refresh>,
    multi_piece: Option<MultiPiece>,
}

/// The part when `cfg` uses it: HC in the kind, or `hc_discriminator` on.
pub fn build(cfg: &ObjectiveConfig, setup: &mut Setup) -> Result<Option<Box<dyn Part>>> {
    let c = &cfg.parts.hc;
    let mlm = cfg.kind.has(NAME);
    if !mlm && c.hc_discriminator == DiscriminatorCorrection::Off {
        return Ok(None);
    }
    // The run's tokenizer and WordNet, opened at most once for the tables and the multi-piece
    // rule.
    let mut opened = None;
    let (table, refresh) = match (setup.synonyms.take(), c.hc_source) {
        (Some(t), _) => (t, None),
        (None, TableSource::Table) => (
            synonym_table(c.lexicon.as_deref(), setup, &mut opened)?,
            None,
        ),
        (None, TableSource::SelfTable) => self_table(c, setup, &mut opened)?,
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
        table: SharedTable::new(table),
        refresh,
        multi_piece,
    })))
}

/// The self table's first table and its refresh: the candidates from the run's tokenizer,
/// WordNet's table as the reference its pairs are compared with (none, with a warning, where
/// WordNet cannot be opened and the first table does not need it).
fn self_table(
    c: &HcConfig,
    setup: &Setup,
    opened: &mut Option<(WordPieceTokenizer, WordNet)>,
) -> Result<(SynonymTable, Option<Refresh>)> {
    let tokenizer = crate::text::prepare::shard_tokenizer(&shards(setup)?.dir)?;
    let stop_words = match &c.hc_self_stop_words {
        Some(p) => read_stop_words(p)?,
        None => Default::default(),
    };
    let reference = match c.hc_self_initial {
        InitialTable::Table => Some(synonym_table(None, setup, opened)?),
        InitialTable::None => synonym_table(None, setup, opened)
            .inspect_err(|e| tracing::warn!("the self table is not compared with WordNet's: {e}"))
            .ok(),
    };
    let initial = match (c.hc_self_initial, &c.lexicon) {
        (InitialTable::Table, Some(p)) => synonym_table(Some(p), setup, opened)?,
        (InitialTable::Table, None) => reference.clone().expect("WordNet's table"),
        (InitialTable::None, _) => SynonymTable::from_pairs(
            tokenizer.vocab_size(),
            tokenizer.fingerprint(),
            "none".into(),
            Vec::new(),
        ),
    };
    let build = SelfSynonyms {
        k: c.hc_self_k,
        threshold: c.hc_self_min_cosine as f32,
        stop_words,
    };
    let wordnet = c.hc_self_words.wordnet(&default_wordnet_dir());
    if reference.is_none() && c.hc_self_min_precision > 0.0 {
        tracing::warn!(
            "objective.hc_self_min_precision = {}: without WordNet's table to measure it, every rebuilt self table is used",
            c.hc_self_min_precision
        );
    }
    let refresh = Refresh {
        candidates: c
            .hc_self_words
            .ids(&tokenizer, &build.stop_words, wordnet.as_ref()),
        build,
        vocab: tokenizer.vocab_size(),
        fingerprint: tokenizer.fingerprint(),
        every: c.hc_refresh_every,
        reference,
        min_precision: c.hc_self_min_precision,
    };
    Ok((initial, Some(refresh)))
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
    lexicon: Option<&Path>,
    setup: &Setup,
    opened: &mut Option<(WordPieceTokenizer, WordNet)>,
) -> Result<SynonymTable> {
    let fp = &shards(setup)?.manifest.tokenizer_fingerprint;
    if let Some(p) = lexicon {
        return SynonymTable::load_for(p, fp);
    }
    let run = setup
        .run
        .ok_or_else(|| super::missing(NAME, "a run folder for its WordNet table"))?;
    let path = run.join("lexicon.safetensors");
    if path.is_present() {
        return SynonymTable::load_for(&path, fp);
    }
    let (tokenizer, wordnet) = opened.insert(tokenizer_and_wordnet(setup)?);
    let table = wordnet_table_from(tokenizer, wordnet, &default_wordnet_dir());
    if !setup.read_only {
        table.save(&path)?;
    }
    Ok(table)
}

/// The record of a refresh.
const REFRESH: &str = "synonym_refresh";

impl HardCorrection {
    /// The synonym table on `s`'s device, padded to the model's vocabulary.
    fn device_table(&self, s: &MlmStep) -> Tensor<2, Int> {
        self.table.on_device(s.words.dims()[0], s.device)
    }

    /// Rebuilds the self table from the embeddings of `at`: its record, and whether the
    /// step's inputs changed. The rebuilt table replaces the one in use only when it passes the
    /// quality gate; otherwise a warning says so, and the record's `accepted` is 0.
    fn refreshed(&self, refresh: &Refresh, at: &Between) -> BetweenSteps {
        let before = self.table.get();
        let source = format!("self:step-{}", at.done);
        let (table, r) = refresh.run((at.words)(), &before, &source);
        let accepted = r.accepted == 1;
        let note = r.note(refresh.min_precision, &before.source);
        if accepted {
            self.table.replace(table);
        }
        let values = serde_json::to_value(&r).expect("json");
        let record = Record {
            name: REFRESH,
            values: serde_json::from_value(values).expect("an object"),
            text: None,
            note,
            warning: !accepted,
        };
        // A table that failed the gate leaves the one in use, and the step's inputs, as they
        // were.
        BetweenSteps {
            records: vec![record],
            replaced_inputs: accepted,
        }
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
        let (mut w, mut c) =
            correction_weights(pred, labels, &s.rows, s.batch.batch, &self.table.get());
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

/// A count known on the host as a `[1]` tensor on `device`: filled there, not uploaded (a
/// recorded step uploads nothing).
fn count(v: usize, device: &Device) -> Tensor<1, Int> {
    Tensor::full([1], v as i64, device)
}

/// Whether `b[i]` differs from `a[i]` and is one of its synonyms in `table` (a
/// `text::shared_table::padded_table`), on the device: `[n]`.
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

    fn between_steps(&self, at: &Between) -> Result<BetweenSteps> {
        let Some(refresh) = self.refresh.as_ref().filter(|r| r.due(at.done)) else {
            return Ok(BetweenSteps::default());
        };
        Ok(self.refreshed(refresh, at))
    }

    fn synonyms(&self) -> Option<Arc<SynonymTable>> {
        Some(self.table.get())
    }

    fn save_state(&self, dir: &Path) -> Result<()> {
        match &self.refresh {
            Some(_) => self.table.get().save(&dir.join(IN_CHECKPOINT)),
            None => Ok(()),
        }
    }

    fn restore_state(&self, dir: &Path, at: &Between) -> Result<()> {
        let Some(refresh) = &self.refresh else {
            return Ok(());
        };
        let path = dir.join(IN_CHECKPOINT);
        if path.is_present() {
            self.table
                .replace(SynonymTable::load_for(&path, &refresh.fingerprint)?);
        } else {
            tracing::warn!(
                "{}: no synonym table saved; rebuilt from the checkpoint's embeddings",
                dir.display()
            );
            self.refreshed(refresh, at);
        }
        Ok(())
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
