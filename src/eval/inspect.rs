//! What Hard Correction corrects, position by position: a checkpoint's predictions at masked
//! positions of a corpus (masked as the run masks, predicted by the run's own rule:
//! `train::stats`), each with its gold token, its probability, whether the gold token
//! has synonyms in the table, whether the prediction is one of them and whether Hard
//! Correction would drop the position from the loss. Summaries: counts by the gold word's part
//! of speech (WordNet's dominant sense: the part of speech with the most synsets over its
//! lemmas; "other" for words WordNet lacks), and the most frequent (gold, prediction) pairs
//! corrected and mismatched but not corrected.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand::seq::index::sample;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::lexicon::WordNet;
use crate::text::batches::Batch;
use crate::text::marked_context::{around_mark, cell, word_and_context};
use crate::text::masking::Masked;
use crate::text::{SynonymTable, WordPieceTokenizer};
use crate::train::checkpoint;
use crate::train::stats::{Predicted, Probe, ProbeRequest, predict_masked, verdicts};
use crate::{Error, Result};

/// What to inspect.
pub struct InspectRequest<'a> {
    /// The run, the corpus, the table each checkpoint is judged with, the batches and the seed.
    pub probe: ProbeRequest<'a>,
    /// The checkpoint's step (`None`: the latest).
    pub step: Option<u64>,
    /// WordNet, for the gold words' parts of speech.
    pub wordnet: &'a WordNet,
    /// Positions written out (a seeded sample of all the masked ones).
    pub sample: usize,
}

/// One masked position.
#[derive(Clone, Debug, Serialize)]
pub struct Position {
    /// The sequence's text with the masked piece between ⟦ ⟧.
    pub context: String,
    pub gold: String,
    pub predicted: String,
    pub probability: f32,
    /// The gold word's part of speech.
    pub pos: String,
    /// The gold token has synonyms in the table.
    pub gold_in_table: bool,
    /// The prediction is one of them.
    pub synonym: bool,
    /// Hard Correction would drop the position from the masked-LM loss.
    pub dropped: bool,
}

/// Counts of one part of speech (or of all).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counts {
    pub masked: usize,
    pub mismatched: usize,
    pub corrected: usize,
}

/// Everything `inspect` reports.
#[derive(Debug, Serialize)]
pub struct Inspection {
    pub step: u64,
    pub lexicon: String,
    pub prediction: String,
    pub seed: u64,
    pub total: Counts,
    pub by_pos: BTreeMap<String, Counts>,
    /// The most frequent (gold, prediction, count), corrected.
    pub corrected_pairs: Vec<(String, String, usize)>,
    /// The most frequent (gold, prediction, count), mismatched and not corrected.
    pub uncorrected_pairs: Vec<(String, String, usize)>,
    pub sample: Vec<Position>,
}

/// Pairs listed per kind.
const TOP_PAIRS: usize = 50;

fn part_of_speech(wordnet: &WordNet, word: &str) -> String {
    match wordnet.dominant_pos(&word.to_lowercase()) {
        Some((p, _, _)) => crate::lexicon::wordnet_files::POS[p].to_string(),
        None => "other".to_string(),
    }
}

fn top(pairs: BTreeMap<(String, String), usize>) -> Vec<(String, String, usize)> {
    let mut v: Vec<(String, String, usize)> =
        pairs.into_iter().map(|((g, p), n)| (g, p, n)).collect();
    // Most frequent first; ties in the pairs' order.
    v.sort_by_key(|p| std::cmp::Reverse(p.2));
    v.truncate(TOP_PAIRS);
    v
}

/// The positions of one batch, each with its flat index among the batch's masked positions,
/// judged with `table`.
fn batch_positions(
    r: &InspectRequest,
    table: &SynonymTable,
    tok: &WordPieceTokenizer,
    b: &Batch,
    m: &Masked,
    predicted: &Predicted,
) -> Vec<Position> {
    let (weights, _) = verdicts(b, m, &predicted.ids, table);
    let labels = &m.labels;
    m.positions
        .iter()
        .enumerate()
        .map(|(k, &p)| {
            let (row, col) = (p / b.len, p % b.len);
            let span = row * b.len..(row + 1) * b.len;
            let real = b.attention_mask[span.clone()]
                .iter()
                .filter(|&&m| m > 0)
                .count();
            // The batch holds the corpus's tokens; the masked inputs are the model's.
            let ids = &b.ids[span.start..span.start + real];
            let (word, context) = word_and_context(tok, ids, col);
            let token = |id: u32| tok.inner.id_to_token(id).unwrap_or_default();
            Position {
                context,
                gold: token(labels[k]),
                predicted: token(predicted.ids[k]),
                probability: predicted.probability[k],
                pos: part_of_speech(r.wordnet, &word),
                gold_in_table: !table.synonyms(labels[k]).is_empty(),
                synonym: table.are_synonyms(labels[k], predicted.ids[k]),
                dropped: weights[k] == 0.0,
            }
        })
        .collect()
}

/// Inspects one checkpoint of `r.probe.run` (see the module documentation).
pub fn inspect(r: &InspectRequest) -> Result<Inspection> {
    let probe = Probe::open(&r.probe)?;
    let checkpoints = checkpoint::list(r.probe.run);
    let (step, dir) = match r.step {
        None => checkpoints.last().cloned(),
        Some(s) => checkpoints.iter().find(|(k, _)| *k == s).cloned(),
    }
    .ok_or_else(|| {
        let have: Vec<String> = checkpoints.iter().map(|(k, _)| k.to_string()).collect();
        Error::Checkpoint(format!(
            "{}: no checkpoint{} (it has: {})",
            r.probe.run.display(),
            r.step.map(|s| format!(" at step {s}")).unwrap_or_default(),
            if have.is_empty() {
                "none".into()
            } else {
                have.join(", ")
            }
        ))
    })?;
    let model = probe.model_at(&dir)?;
    let table = r.probe.tables.at(&dir)?;
    let mut draws = ChaCha8Rng::seed_from_u64(r.probe.seed.wrapping_add(2));
    let mut all = Vec::new();
    for (b, m) in &probe.batches {
        let predicted = predict_masked(&model, probe.rule(), b, m, &probe.device, &mut draws);
        all.extend(batch_positions(
            r,
            &table,
            &probe.tokenizer,
            b,
            m,
            &predicted,
        ));
    }
    let mut total = Counts::default();
    let mut by_pos: BTreeMap<String, Counts> = BTreeMap::new();
    let (mut corrected, mut uncorrected) = (BTreeMap::new(), BTreeMap::new());
    for p in &all {
        let mismatched = p.gold != p.predicted;
        for c in [&mut total, by_pos.entry(p.pos.clone()).or_default()] {
            c.masked += 1;
            c.mismatched += usize::from(mismatched);
            c.corrected += usize::from(p.dropped);
        }
        let pair = (p.gold.clone(), p.predicted.clone());
        if p.dropped {
            *corrected.entry(pair).or_insert(0) += 1;
        } else if mismatched {
            *uncorrected.entry(pair).or_insert(0) += 1;
        }
    }
    let mut picker = ChaCha8Rng::seed_from_u64(r.probe.seed.wrapping_add(1));
    let mut chosen = sample(&mut picker, all.len(), r.sample.min(all.len())).into_vec();
    chosen.sort_unstable();
    Ok(Inspection {
        step,
        lexicon: table.source.clone(),
        prediction: serde_json::to_value(probe.rule())
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_else(|| "argmax".into()),
        seed: r.probe.seed,
        total,
        by_pos,
        corrected_pairs: top(corrected),
        uncorrected_pairs: top(uncorrected),
        sample: chosen.into_iter().map(|i| all[i].clone()).collect(),
    })
}

/// The sample as a TSV file (a header line, then one position per line; tabs and newlines in
/// the text become spaces).
pub fn sample_tsv(i: &Inspection) -> String {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let mut out = String::from(
        "context\tgold\tpredicted\tprobability\tpos\tgold_in_table\tsynonym\tdropped\n",
    );
    for p in &i.sample {
        out += &format!(
            "{}\t{}\t{}\t{:.4}\t{}\t{}\t{}\t{}\n",
            clean(&p.context),
            clean(&p.gold),
            clean(&p.predicted),
            p.probability,
            p.pos,
            p.gold_in_table,
            p.synonym,
            p.dropped
        );
    }
    out
}

/// The page a person reads: counts, the pairs and the sample.
pub fn page(i: &Inspection) -> String {
    let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    let mut md = format!(
        "# What Hard Correction corrects at step {}\n\nLexicon: {}. Predictions: {} (the run's hc_prediction). Seed {}.\n\n",
        i.step, i.lexicon, i.prediction, i.seed
    );
    md += "| part of speech | masked | mismatched | corrected | corrected / mismatched |\n|---|---:|---:|---:|---:|\n";
    for (pos, c) in i.by_pos.iter().chain([(&"all".to_string(), &i.total)]) {
        md += &format!(
            "| {pos} | {} | {} | {} | {:.1} % |\n",
            c.masked,
            c.mismatched,
            c.corrected,
            pct(c.corrected, c.mismatched)
        );
    }
    for (title, pairs) in [
        ("Corrected (gold → prediction)", &i.corrected_pairs),
        (
            "Mismatched, not corrected (gold → prediction)",
            &i.uncorrected_pairs,
        ),
    ] {
        md += &format!("\n## {title}\n\n| gold | prediction | count |\n|---|---|---:|\n");
        for (g, p, n) in pairs {
            md += &format!("| {} | {} | {n} |\n", cell(g), cell(p));
        }
    }
    md += "\n## Sample\n\n| context | gold | prediction | p | in table | synonym | dropped |\n|---|---|---|---:|---|---|---|\n";
    for p in &i.sample {
        md += &format!(
            "| {} | {} | {} | {:.3} | {} | {} | {} |\n",
            cell(&around_mark(&p.context, 12)),
            cell(&p.gold),
            cell(&p.predicted),
            p.probability,
            p.gold_in_table,
            p.synonym,
            p.dropped
        );
    }
    md
}
