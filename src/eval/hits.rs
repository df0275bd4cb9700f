//! Hits (CLINE §4.6): does an encoder put a sentence closer to its synonym version than to its
//! antonym version?
//!
//! Triplets (x_ori, x_syn, x_ant) differ in one word: a candidate word (the rules of
//! [`crate::text::cline`]) that has both a same-part-of-speech WordNet synonym and antonym.
//! For each layer l (0 = the embeddings) and each pooling — the [CLS] vector, or the mean over
//! real tokens — `Hits_l = share of triplets with cos(h_ori, h_syn) > cos(h_ori, h_ant)`;
//! the report also gives the maximum over layers (the paper's Table 7). A tie is not a hit: at
//! layer 0 the three [CLS] vectors are the same embedding, so [CLS] Hits there is 0.

use burn::prelude::*;
use rand::SeedableRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::finetune::classify::{Classifier, ClsHead, batch_inputs, encode_pair};
use crate::finetune::pretrained::PretrainedEncoder;
use crate::interop::tensors::Loader;
use crate::lexicon::wordnet::WordNet;
use crate::lexicon::words::{in_compound, is_name_or_number, is_stop, match_case, tokens};

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

/// Hits of one layer, in %.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerHits {
    pub layer: usize,
    pub cls: f64,
    pub mean: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HitsReport {
    pub triplets: usize,
    pub layers: Vec<LayerHits>,
    pub max_cls: f64,
    pub max_mean: f64,
}

/// Row-wise cosine similarity of two [batch, dim] matrices: [batch].
fn cosine(a: Tensor<2>, b: Tensor<2>) -> Tensor<1> {
    let dot = (a.clone() * b.clone()).sum_dim(1);
    let na = (a.clone() * a).sum_dim(1).sqrt();
    let nb = (b.clone() * b).sum_dim(1).sqrt();
    (dot / (na * nb).clamp_min(1e-12)).squeeze_dim(1)
}

/// [CLS] and mean-pooled vectors of every layer: (cls [batch, d], mean [batch, d]) per layer.
fn pooled(
    model: &Classifier,
    rows: &[(Vec<u32>, Vec<u32>)],
    pad: u32,
    device: &Device,
) -> Vec<(Tensor<2>, Tensor<2>)> {
    let x = batch_inputs(rows, pad, device);
    let e = model
        .embeddings
        .forward(x.ids.clone(), x.token_types.clone());
    let states = model.encoder.forward_all(e, x.attention_mask.clone());
    let [b, l] = x.ids.dims();
    let mask = match &x.attention_mask {
        Some(m) => m.clone().float(),
        None => Tensor::ones([b, l], device),
    };
    let counts = mask.clone().sum_dim(1); // [b, 1]
    states
        .into_iter()
        .map(|h| {
            let d = h.dims()[2];
            let cls = h.clone().slice([0..b, 0..1, 0..d]).reshape([b, d]);
            let sum = (h * mask.clone().unsqueeze_dim::<3>(2))
                .sum_dim(1)
                .reshape([b, d]);
            (cls, sum / counts.clone())
        })
        .collect()
}

/// Hits of `pre` (a trueneg run or transformers folder, see
/// [`crate::finetune::pretrained::load_pretrained`]) on `triplets`, `batch` triplets at a time.
pub fn hits(
    pre: &PretrainedEncoder,
    triplets: &[Triplet],
    batch: usize,
    max_len: usize,
) -> Result<HitsReport> {
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
    let mut wins = vec![(0usize, 0usize); layers];
    for chunk in triplets.chunks(batch.max(1)) {
        let enc = |f: &dyn Fn(&Triplet) -> &str| -> Vec<(Vec<u32>, Vec<u32>)> {
            chunk
                .iter()
                .map(|t| encode_pair(&pre.tokenizer, f(t), None, max_len))
                .collect()
        };
        let o = pooled(&model, &enc(&|t| &t.ori), pad, &device);
        let s = pooled(&model, &enc(&|t| &t.syn), pad, &device);
        let a = pooled(&model, &enc(&|t| &t.ant), pad, &device);
        for (l, ((o, s), a)) in o.into_iter().zip(s).zip(a).enumerate() {
            for (k, (ov, sv, av)) in [(o.0.clone(), s.0.clone(), a.0.clone()), (o.1, s.1, a.1)]
                .into_iter()
                .enumerate()
            {
                let closer = cosine(ov.clone(), sv)
                    .greater(cosine(ov, av))
                    .int()
                    .sum()
                    .into_scalar::<i64>() as usize;
                if k == 0 {
                    wins[l].0 += closer;
                } else {
                    wins[l].1 += closer;
                }
            }
        }
    }
    let pct = |n: usize| 100.0 * n as f64 / triplets.len().max(1) as f64;
    let layers: Vec<LayerHits> = wins
        .iter()
        .enumerate()
        .map(|(layer, &(c, m))| LayerHits {
            layer,
            cls: pct(c),
            mean: pct(m),
        })
        .collect();
    Ok(HitsReport {
        triplets: triplets.len(),
        max_cls: layers.iter().map(|l| l.cls).fold(0.0, f64::max),
        max_mean: layers.iter().map(|l| l.mean).fold(0.0, f64::max),
        layers,
    })
}

/// The report as Markdown: one row per layer, then the maxima.
pub fn hits_table(r: &HitsReport) -> String {
    let mut md = format!(
        "Hits over {} triplets (% with cos(ori, syn) > cos(ori, ant))\n\n| layer | [CLS] | mean |\n|---|---|---|\n",
        r.triplets
    );
    for l in &r.layers {
        md += &format!("| {} | {:.1} | {:.1} |\n", l.layer, l.cls, l.mean);
    }
    md += &format!("| max | {:.1} | {:.1} |\n", r.max_cls, r.max_mean);
    md
}

/// The sentences of a file: a `sentence` column of a .tsv, else every non-empty line.
pub fn read_sentences(path: &std::path::Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| crate::Error::io(path, e))?;
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
