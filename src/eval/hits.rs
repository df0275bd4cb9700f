//! Hits (Wang et al. 2021, §4.6): does an encoder put a sentence closer to its synonym version than
//! to its antonym version?
//!
//! Triplets (x_ori, x_syn, x_ant) differ in one word: a candidate word (the rules of
//! [`crate::text::triples`]) that has both a same-part-of-speech WordNet synonym and antonym.
//! For each layer l (0 = the embeddings) and each way of comparing — the `[CLS]` vectors, the
//! mean over real tokens, or BERTScore F1 (greedy matching of the token vectors by cosine,
//! `[CLS]` and `[SEP]` left out) — `Hits_l = share of triplets with sim(ori, syn) >
//! sim(ori, ant)`, cosines computed in f64 on the host. The report's maximum is over the
//! encoder's layers 1…L, as the paper's Table 7 (the embeddings are not a layer of the
//! encoder). A tie is not a hit; ties and near-ties (|Δ| < 1e-6: the `[CLS]` vectors of a
//! small model are nearly the same for sentences one word apart) are counted per layer, so
//! that a Hits figure decided by rounding shows as such.

use burn::prelude::*;
use rand::SeedableRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::finetune::classify::{Classifier, ClsHead, batch_inputs};
use crate::finetune::pretrained::PretrainedEncoder;
use crate::interop::tensors::Loader;
use crate::lexicon::wordnet::WordNet;
use crate::lexicon::words::{in_compound, is_name_or_number, is_stop, match_case, tokens};
use crate::text::pairs::{Truncation, encode_pair};

/// One word of a sentence replaced by a synonym, and by an antonym.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Triplet {
    pub ori: String,
    pub syn: String,
    pub ant: String,
}

/// The triplet of sentence number `index` (at most one per sentence; `None` when no word has
/// both a synonym and an antonym of its part of speech).
pub fn triplet(text: &str, wn: &WordNet, seed: u64, index: u64) -> Option<Triplet> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9FB2_1C65_1E98_DF25) ^ index);
    let toks = tokens(text);
    let mut options: Vec<(usize, usize, Vec<String>, Vec<String>)> = (0..toks.len())
        .filter_map(|i| {
            let (a, b, is_word) = toks[i];
            let w = &text[a..b];
            if !is_word
                || w.chars().count() < 3
                || !w.chars().all(char::is_alphabetic)
                || is_stop(w)
                || in_compound(text, a, b)
                || is_name_or_number(text, &toks, i, wn)
            {
                return None;
            }
            let syn = wn.same_pos_synonyms(w);
            let ant = wn.same_pos_antonyms(w, false);
            (!syn.is_empty() && !ant.is_empty()).then_some((a, b, syn, ant))
        })
        .collect();
    options.shuffle(&mut rng);
    let (a, b, syn, ant) = options.into_iter().next()?;
    let w = &text[a..b];
    let with = |new: &str| format!("{}{}{}", &text[..a], match_case(w, new), &text[b..]);
    Some(Triplet {
        ori: text.to_string(),
        syn: with(syn.choose(&mut rng)?),
        ant: with(ant.choose(&mut rng)?),
    })
}

/// Hits of one layer, in %, and the triplets whose two similarities are within
/// [`NEAR_TIE`] of each other.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerHits {
    pub layer: usize,
    pub cls: f64,
    pub mean: f64,
    #[serde(default)]
    pub bertscore: f64,
    #[serde(default)]
    pub cls_ties: usize,
    #[serde(default)]
    pub mean_ties: usize,
    #[serde(default)]
    pub bertscore_ties: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HitsReport {
    pub triplets: usize,
    pub layers: Vec<LayerHits>,
    /// The maxima over the encoder's layers 1…L.
    pub max_cls: f64,
    pub max_mean: f64,
    #[serde(default)]
    pub max_bertscore: f64,
}

/// Two similarities closer than this are a (near-)tie.
pub const NEAR_TIE: f64 = 1e-6;

fn cos64(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    dot / (na.sqrt() * nb.sqrt()).max(1e-300)
}

/// One layer's hidden states of a batch on the host: `[batch][token][dim]`, real tokens only.
type HostStates = Vec<Vec<Vec<f32>>>;

/// Every layer's hidden states (0 = the embeddings) of `rows`, real tokens only.
fn states(
    model: &Classifier,
    rows: &[(Vec<u32>, Vec<u32>)],
    pad: u32,
    device: &Device,
) -> Vec<HostStates> {
    let x = batch_inputs(rows, pad, device);
    let e = model
        .embeddings
        .forward(x.ids.clone(), x.token_types.clone());
    let all = model.encoder.forward_all(e, x.attention_mask.clone());
    all.into_iter()
        .map(|h| {
            let [_, l, d] = h.dims();
            let v = crate::interop::tensors::HostTensor::from_tensor(h).values;
            rows.iter()
                .enumerate()
                .map(|(r, (ids, _))| {
                    (0..ids.len())
                        .map(|t| v[(r * l + t) * d..(r * l + t + 1) * d].to_vec())
                        .collect()
                })
                .collect()
        })
        .collect()
}

fn mean_vector(tokens: &[Vec<f32>]) -> Vec<f32> {
    let d = tokens[0].len();
    let mut m = vec![0.0f64; d];
    for t in tokens {
        for (a, &x) in m.iter_mut().zip(t) {
            *a += x as f64;
        }
    }
    m.iter()
        .map(|&x| (x / tokens.len() as f64) as f32)
        .collect()
}

/// BERTScore F1 of two sentences' token vectors (`[CLS]` and `[SEP]` left out).
pub fn bertscore(x: &[Vec<f32>], y: &[Vec<f32>]) -> f64 {
    let inner = |t: &[Vec<f32>]| -> Vec<Vec<f32>> {
        if t.len() > 2 {
            t[1..t.len() - 1].to_vec()
        } else {
            t.to_vec()
        }
    };
    let (x, y) = (inner(x), inner(y));
    let sims: Vec<Vec<f64>> = x
        .iter()
        .map(|a| y.iter().map(|b| cos64(a, b)).collect())
        .collect();
    let recall = sims
        .iter()
        .map(|r| r.iter().copied().fold(f64::MIN, f64::max))
        .sum::<f64>()
        / x.len() as f64;
    let precision = (0..y.len())
        .map(|j| sims.iter().map(|r| r[j]).fold(f64::MIN, f64::max))
        .sum::<f64>()
        / y.len() as f64;
    if precision + recall <= 0.0 {
        return 0.0;
    }
    2.0 * precision * recall / (precision + recall)
}

/// The three similarities (cls, mean, BERTScore) of `a` and `b`.
fn similarities(a: &[Vec<f32>], b: &[Vec<f32>]) -> [f64; 3] {
    [
        cos64(&a[0], &b[0]),
        cos64(&mean_vector(a), &mean_vector(b)),
        bertscore(a, b),
    ]
}

/// Hits of `pre` (a trueneg run or transformers folder, see
/// [`crate::finetune::pretrained::load_pretrained`]) on `triplets`, `batch` triplets at a time.
pub fn hits(
    pre: &PretrainedEncoder,
    triplets: &[Triplet],
    batch: usize,
    max_len: usize,
) -> Result<HitsReport> {
    // A sentence longer than the model's positions has no position embedding: cut to them.
    let max_len = max_len.min(pre.config.max_position_embeddings);
    let device = crate::device::host();
    let mut model = Classifier::new(
        &pre.config.clone().without_dropout(),
        1,
        ClsHead::Linear,
        &device,
    );
    let mut loader = Loader::new(&pre.weights, &device);
    model.walk_encoder(&pre.prefix, &mut loader);
    loader.finish()?;
    let pad = pre.tokenizer.special.pad;
    let layers = pre.config.num_hidden_layers + 1;
    // Per layer and comparison: (hits, ties).
    let mut counts = vec![[(0usize, 0usize); 3]; layers];
    for chunk in triplets.chunks(batch.max(1)) {
        let enc = |f: &dyn Fn(&Triplet) -> &str| -> Vec<(Vec<u32>, Vec<u32>)> {
            chunk
                .iter()
                .map(|t| encode_pair(&pre.tokenizer, f(t), None, max_len, Truncation::Greedy))
                .collect()
        };
        let o = states(&model, &enc(&|t| &t.ori), pad, &device);
        let s = states(&model, &enc(&|t| &t.syn), pad, &device);
        let a = states(&model, &enc(&|t| &t.ant), pad, &device);
        for (l, ((o, s), a)) in o.iter().zip(&s).zip(&a).enumerate() {
            for r in 0..chunk.len() {
                let syn = similarities(&o[r], &s[r]);
                let ant = similarities(&o[r], &a[r]);
                for k in 0..3 {
                    let c = &mut counts[l][k];
                    c.0 += usize::from(syn[k] > ant[k]);
                    c.1 += usize::from((syn[k] - ant[k]).abs() < NEAR_TIE);
                }
            }
        }
    }
    let pct = |n: usize| 100.0 * n as f64 / triplets.len().max(1) as f64;
    let layers: Vec<LayerHits> = counts
        .iter()
        .enumerate()
        .map(|(layer, c)| LayerHits {
            layer,
            cls: pct(c[0].0),
            mean: pct(c[1].0),
            bertscore: pct(c[2].0),
            cls_ties: c[0].1,
            mean_ties: c[1].1,
            bertscore_ties: c[2].1,
        })
        .collect();
    let max = |f: fn(&LayerHits) -> f64| layers[1..].iter().map(f).fold(0.0, f64::max);
    Ok(HitsReport {
        triplets: triplets.len(),
        max_cls: max(|l| l.cls),
        max_mean: max(|l| l.mean),
        max_bertscore: max(|l| l.bertscore),
        layers,
    })
}

/// The report as Markdown: one row per layer, then the maxima.
pub fn hits_table(r: &HitsReport) -> String {
    let mut md = format!(
        "Hits over {} triplets (% with sim(ori, syn) > sim(ori, ant); ties and near-ties, |Δ| < 1e-6, in brackets; layer 0 is the embeddings)\n\n| layer | [CLS] | mean | BERTScore |\n|---|---|---|---|\n",
        r.triplets
    );
    for l in &r.layers {
        md += &format!(
            "| {} | {:.1} ({}) | {:.1} ({}) | {:.1} ({}) |\n",
            l.layer, l.cls, l.cls_ties, l.mean, l.mean_ties, l.bertscore, l.bertscore_ties
        );
    }
    md += &format!(
        "| max over layers 1–{} | {:.1} | {:.1} | {:.1} |\n",
        r.layers.len().saturating_sub(1),
        r.max_cls,
        r.max_mean,
        r.max_bertscore
    );
    md
}

/// The sentences of a file: a `sentence` column of a .tsv, else every non-empty line.
pub fn read_sentences(path: &std::path::Path) -> Result<Vec<String>> {
    let text = crate::io::read::read_text(path, crate::io::limit::DATA)?;
    let mut lines = text.lines();
    if path.extension().is_some_and(|e| e == "tsv") {
        let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
        let col = header
            .iter()
            .position(|h| *h == "sentence")
            .ok_or_else(|| {
                crate::Error::Input(format!(
                    "{}:1: no `sentence` column in the header",
                    path.display()
                ))
            })?;
        return lines
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                l.split('\t').nth(col).map(str::to_string).ok_or_else(|| {
                    crate::Error::Input(format!(
                        "{}:{}: no column {}",
                        path.display(),
                        i + 2,
                        col + 1
                    ))
                })
            })
            .collect();
    }
    Ok(lines
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect())
}
