//! Fine-tuning on GLUE: a classification / regression head on the [CLS] hidden state
//! (dropout + linear, as in ELECTRA's fine-tuning code) over a pre-trained encoder, trained
//! with ELECTRA's recipe: AdamW, warmup over the first 10 % of steps then linear decay,
//! layer-wise learning-rate decay (the top layer gets factor 1, each layer below × decay, the
//! embeddings the lowest factor decay^L), several seeds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::interop::read_hf_config;
use crate::interop::tensors::{Exporter, Loader, TensorMap, read_safetensors, write_safetensors};
use crate::kernels::dropout::dropout;
use crate::model::encoder::{Embeddings, Encoder};
use crate::model::params::{ParamWalker, walk_linear};
use crate::model::{EncoderConfig, Inputs};
use crate::tasks::glue::{GlueExample, GlueTask, Label, read_glue};
use crate::tasks::metrics::{accuracy, f1_binary, matthews, pearson, spearman};
use crate::text::WordPieceTokenizer;
use crate::train::checkpoint;
use crate::train::config::{ModelKind, PretrainConfig};
use crate::train::optimizer::{AdamW, AdamWConfig, Grads, scheduled_lr};
use crate::{Error, Result};

/// A pre-trained encoder ready for fine-tuning: config, weights (transformers names), the
/// name prefix (`electra` or `bert`) and the tokenizer.
pub struct PretrainedEncoder {
    pub config: EncoderConfig,
    pub weights: TensorMap,
    pub prefix: String,
    pub tokenizer: WordPieceTokenizer,
}

fn find_tokenizer(dirs: &[&Path]) -> Result<WordPieceTokenizer> {
    for d in dirs {
        for name in ["tokenizer.json", "vocab.txt"] {
            if d.join(name).exists() {
                return WordPieceTokenizer::load(&d.join(name));
            }
        }
    }
    Err(Error::Input(format!(
        "{}: no tokenizer.json or vocab.txt next to the model",
        dirs[0].display()
    )))
}

/// Loads a trueneg run directory (its latest checkpoint; ELECTRA's discriminator) or a
/// transformers directory (`config.json` + `model.safetensors`; an ELECTRA export's
/// `discriminator/` is used when present).
pub fn load_pretrained(model: &Path) -> Result<PretrainedEncoder> {
    if model.join("config.toml").exists() {
        let cfg = PretrainConfig::load(&model.join("config.toml").to_string_lossy(), &[])?;
        let (_, dir) = checkpoint::list(model)
            .pop()
            .ok_or_else(|| Error::Checkpoint(format!("{}: no checkpoint", model.display())))?;
        let weights = read_safetensors(&dir.join("model.safetensors"))?;
        let prefix = match cfg.model.kind {
            ModelKind::Electra => "electra",
            ModelKind::Bert => "bert",
        };
        let vocab = weights
            .tensors
            .get(&format!("{prefix}.embeddings.word_embeddings.weight"))
            .map(|t| t.shape[0])
            .ok_or_else(|| Error::Checkpoint(format!("{}: no word embeddings", dir.display())))?;
        let tokenizer = find_tokenizer(&[model])?;
        return Ok(PretrainedEncoder {
            config: cfg.model.encoder(vocab),
            weights,
            prefix: prefix.into(),
            tokenizer,
        });
    }
    let dir = if model.join("discriminator/config.json").exists() {
        model.join("discriminator")
    } else {
        model.to_path_buf()
    };
    let hf = read_hf_config(&dir.join("config.json"))?;
    let weights = read_safetensors(&dir.join("model.safetensors"))?;
    let tokenizer = find_tokenizer(&[&dir, model])?;
    if tokenizer.vocab_size() != hf.encoder.vocab_size {
        return Err(Error::Input(format!(
            "{}: field `vocab_size` is {}, the tokenizer has {} tokens",
            dir.join("config.json").display(),
            hf.encoder.vocab_size,
            tokenizer.vocab_size()
        )));
    }
    Ok(PretrainedEncoder {
        config: hf.encoder,
        weights,
        prefix: hf.model_type,
        tokenizer,
    })
}

/// Encoder + [CLS] head.
#[derive(Module, Debug)]
pub struct Classifier {
    pub embeddings: Embeddings,
    pub encoder: Encoder,
    pub dropout: Dropout,
    pub head: Linear,
}

impl Classifier {
    pub fn new(c: &EncoderConfig, outputs: usize, device: &Device) -> Self {
        Self {
            embeddings: Embeddings::new(c, device),
            encoder: Encoder::new(c, device),
            dropout: DropoutConfig::new(c.hidden_dropout_prob).init(),
            head: crate::model::encoder::linear(c.hidden_size, outputs, device),
        }
    }

    /// [batch, outputs].
    pub fn forward(&self, x: &Inputs) -> Tensor<2> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        let h = self.encoder.forward(e, x.attention_mask.clone());
        let [b, _, d] = h.dims();
        let cls = h.slice([0..b, 0..1, 0..d]).reshape([b, d]);
        self.head.forward(dropout(&self.dropout, cls))
    }

    /// The encoder's parameters under `prefix`.
    pub fn walk_encoder(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        self.embeddings.walk(&format!("{prefix}.embeddings"), w);
        self.encoder.walk(prefix, w);
    }

    pub fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        self.walk_encoder(prefix, w);
        walk_linear(w, "classifier", &mut self.head);
    }
}

/// Learning-rate factor of a parameter under layer-wise decay: `decay^(L − 1 − i)` for layer i
/// of L, `decay^L` for the embeddings (and their projection), 1 for the head.
pub fn layer_decay_factor(name: &str, prefix: &str, layers: usize, decay: f64) -> f64 {
    if let Some(rest) = name.strip_prefix(&format!("{prefix}.encoder.layer.")) {
        let i: usize = rest
            .split('.')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(layers - 1);
        return decay.powi((layers - 1 - i.min(layers - 1)) as i32);
    }
    if name.starts_with(&format!("{prefix}.embeddings")) {
        return decay.powi(layers as i32);
    }
    1.0
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FinetuneOptions {
    pub lr: f64,
    pub layer_decay: f64,
    pub epochs: usize,
    pub batch_size: usize,
    pub max_seq_len: usize,
    pub warmup_fraction: f64,
    pub weight_decay: f64,
    /// Use at most this many training examples (0 = all).
    pub max_train_examples: usize,
    /// Paraphrase tasks (MRPC, QQP): also train on (B, A).
    pub both_orders: bool,
    /// The device to train and predict on (`cpu`, `cuda`, `libtorch-cuda`, … as built).
    #[serde(default = "cpu")]
    pub device: String,
}

fn cpu() -> String {
    "cpu".into()
}

impl FinetuneOptions {
    /// Checks every value against its range; the error names the option.
    pub fn validate(&self) -> Result<()> {
        let rules = [
            (
                "--lr",
                self.lr.to_string(),
                self.lr.is_finite() && self.lr > 0.0,
                "> 0",
            ),
            (
                "--layer-decay",
                self.layer_decay.to_string(),
                self.layer_decay > 0.0 && self.layer_decay <= 1.0,
                "in (0, 1]",
            ),
            ("--epochs", self.epochs.to_string(), self.epochs > 0, "> 0"),
            (
                "--batch-size",
                self.batch_size.to_string(),
                self.batch_size > 0,
                "> 0",
            ),
            (
                "--max-seq-len",
                self.max_seq_len.to_string(),
                self.max_seq_len >= 8,
                ">= 8",
            ),
            (
                "warmup fraction",
                self.warmup_fraction.to_string(),
                (0.0..=1.0).contains(&self.warmup_fraction),
                "in [0, 1]",
            ),
            (
                "weight decay",
                self.weight_decay.to_string(),
                self.weight_decay.is_finite() && self.weight_decay >= 0.0,
                ">= 0",
            ),
        ];
        match rules.into_iter().find(|r| !r.2) {
            Some((name, value, _, rule)) => {
                Err(Error::Config(format!("{name} {value}: must be {rule}")))
            }
            None => Ok(()),
        }
    }

    pub fn electra(task: GlueTask) -> Self {
        Self {
            lr: 1e-4,
            layer_decay: 0.8,
            epochs: task.default_epochs(),
            batch_size: 32,
            max_seq_len: 128,
            warmup_fraction: 0.1,
            weight_decay: 0.01,
            max_train_examples: 0,
            both_orders: false,
            device: cpu(),
        }
    }
}

/// Token ids and segment ids of `[CLS] a [SEP] (b [SEP])`, truncated longest-first.
pub fn encode_pair(
    t: &WordPieceTokenizer,
    a: &str,
    b: Option<&str>,
    max_len: usize,
) -> (Vec<u32>, Vec<u32>) {
    let mut ta = t.encode(a);
    let mut tb = b.map(|b| t.encode(b)).unwrap_or_default();
    let budget = max_len.saturating_sub(if b.is_some() { 3 } else { 2 });
    while ta.len() + tb.len() > budget {
        if ta.len() >= tb.len() {
            ta.pop()
        } else {
            tb.pop()
        };
    }
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

pub(crate) fn batch_inputs(rows: &[(Vec<u32>, Vec<u32>)], pad: u32, device: &Device) -> Inputs {
    let len = rows.iter().map(|r| r.0.len()).max().unwrap_or(1);
    let b = rows.len();
    let (mut ids, mut types, mut mask) = (
        vec![pad as i64; b * len],
        vec![0i64; b * len],
        vec![0i64; b * len],
    );
    for (r, (i, t)) in rows.iter().enumerate() {
        for k in 0..i.len() {
            ids[r * len + k] = i[k] as i64;
            types[r * len + k] = t[k] as i64;
            mask[r * len + k] = 1;
        }
    }
    Inputs {
        ids: Tensor::from_data(TensorData::new(ids, [b, len]), device),
        token_types: Tensor::from_data(TensorData::new(types, [b, len]), device),
        attention_mask: Some(Tensor::from_data(TensorData::new(mask, [b, len]), device)),
    }
}

/// Dev-set scores of one fine-tuned model: each metric (in %) and the task score (GLUE's: the
/// mean of the task's metrics).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Scores {
    pub metrics: BTreeMap<String, f64>,
    pub score: f64,
}

/// Predictions: a class per example, or a score for STS-B.
pub fn score(task: GlueTask, pred: &[f64], gold: &[Label]) -> Scores {
    let mut m = BTreeMap::new();
    if task.is_regression() {
        let g: Vec<f64> = gold
            .iter()
            .map(|l| if let Label::Score(s) = l { *s } else { 0.0 })
            .collect();
        m.insert("pearson".into(), 100.0 * pearson(pred, &g));
        m.insert("spearman".into(), 100.0 * spearman(pred, &g));
    } else {
        let p: Vec<usize> = pred.iter().map(|&v| v as usize).collect();
        let g: Vec<usize> = gold
            .iter()
            .map(|l| {
                if let Label::Class(c) = l {
                    *c
                } else {
                    usize::MAX
                }
            })
            .collect();
        match task {
            GlueTask::Cola => {
                m.insert("mcc".into(), 100.0 * matthews(&p, &g));
            }
            GlueTask::Mrpc | GlueTask::Qqp => {
                m.insert("accuracy".into(), 100.0 * accuracy(&p, &g));
                m.insert("f1".into(), 100.0 * f1_binary(&p, &g));
            }
            _ => {
                m.insert("accuracy".into(), 100.0 * accuracy(&p, &g));
            }
        }
    }
    let score = m.values().sum::<f64>() / m.len() as f64;
    Scores { metrics: m, score }
}

/// A fine-tuned model with what `evaluate` needs to use it again.
pub struct FineTuned {
    pub model: Classifier,
    pub task: GlueTask,
    pub prefix: String,
    pub config: EncoderConfig,
}

/// A progress bar over `len` items with `template`, hidden when `show` is false.
pub(crate) fn progress_bar(len: u64, template: &str, show: bool) -> ProgressBar {
    let bar = if show {
        ProgressBar::new(len)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(ProgressStyle::with_template(template).expect("template"));
    bar
}

/// Predicted class (or score) per example, with examples/s.
pub fn predict(
    m: &FineTuned,
    tokenizer: &WordPieceTokenizer,
    examples: &[GlueExample],
    max_len: usize,
    batch: usize,
    device: &Device,
    progress: bool,
) -> (Vec<f64>, f64) {
    let start = Instant::now();
    let bar = progress_bar(
        examples.len() as u64,
        "evaluate {bar:30} {pos}/{len} {per_sec} eta {eta}",
        progress,
    );
    let mut out = Vec::with_capacity(examples.len());
    for chunk in examples.chunks(batch) {
        let rows: Vec<_> = chunk
            .iter()
            .map(|e| encode_pair(tokenizer, &e.text_a, e.text_b.as_deref(), max_len))
            .collect();
        let logits = m
            .model
            .forward(&batch_inputs(&rows, tokenizer.special.pad, device));
        if m.task.is_regression() {
            out.extend(
                logits
                    .into_data()
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .expect("f32")
                    .into_iter()
                    .map(|v| v as f64),
            );
        } else {
            let a = logits
                .argmax(1)
                .into_data()
                .convert::<i64>()
                .try_into_vec::<i64>()
                .expect("ids");
            out.extend(a.into_iter().map(|v| v as f64));
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    (
        out,
        examples.len() as f64 / start.elapsed().as_secs_f64().max(1e-9),
    )
}

/// Fine-tunes on `train` with one seed and returns the model and the training throughput.
pub fn finetune_one(
    task: GlueTask,
    pre: &PretrainedEncoder,
    train: &[GlueExample],
    opts: &FinetuneOptions,
    seed: u64,
    progress: bool,
) -> Result<(FineTuned, f64)> {
    let base = crate::device::device_for(&opts.device)?;
    crate::model::seed(&base, seed);
    let device = base.clone().autodiff();
    let mut model = Classifier::new(&pre.config, task.num_labels(), &device);
    let mut loader = Loader::new(&pre.weights, &device);
    model.walk_encoder(&pre.prefix, &mut loader);
    loader.finish()?;

    let mut rows: Vec<(Encoded, Label)> = Vec::new();
    for e in train.iter().take(if opts.max_train_examples == 0 {
        usize::MAX
    } else {
        opts.max_train_examples
    }) {
        let Some(label) = e.label else { continue };
        rows.push((
            encode_pair(
                &pre.tokenizer,
                &e.text_a,
                e.text_b.as_deref(),
                opts.max_seq_len,
            ),
            label,
        ));
        if opts.both_orders
            && let Some(b) = &e.text_b
        {
            rows.push((
                encode_pair(&pre.tokenizer, b, Some(&e.text_a), opts.max_seq_len),
                label,
            ));
        }
    }
    if rows.is_empty() {
        return Err(Error::Input("no labelled training examples".into()));
    }
    let n_rows = rows.len();
    let throughput = train_epochs(
        &mut model,
        &pre.prefix,
        pre.config.num_hidden_layers,
        n_rows,
        opts,
        seed,
        progress,
        |model, chunk| {
            let enc: Vec<_> = chunk.iter().map(|&i| rows[i].0.clone()).collect();
            let x = batch_inputs(&enc, pre.tokenizer.special.pad, &device);
            let out = model.forward(&x);
            let n = chunk.len();
            if task.is_regression() {
                let gold: Vec<f32> = chunk
                    .iter()
                    .map(|&i| match rows[i].1 {
                        Label::Score(s) => s as f32,
                        Label::Class(c) => c as f32,
                    })
                    .collect();
                let g = Tensor::<1>::from_data(TensorData::new(gold, [n]), &device);
                (out.reshape([n]) - g).square().mean()
            } else {
                let gold: Vec<i64> = chunk
                    .iter()
                    .map(|&i| match rows[i].1 {
                        Label::Class(c) => c as i64,
                        Label::Score(s) => s as i64,
                    })
                    .collect();
                let g = Tensor::<1, Int>::from_data(TensorData::new(gold, [n]), &device);
                log_softmax(out, 1)
                    .gather(1, g.reshape([n, 1]))
                    .neg()
                    .mean()
            }
        },
    )?;
    let model = model.valid();
    Ok((
        FineTuned {
            model,
            task,
            prefix: pre.prefix.clone(),
            config: pre.config.clone(),
        },
        throughput,
    ))
}

/// A fine-tuning model: its parameters under transformers names.
pub trait Trainable {
    fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker);
}

impl Trainable for Classifier {
    fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        Classifier::walk(self, prefix, w)
    }
}

/// The fine-tuning loop shared by every task: `opts.epochs` passes over `rows` examples in a
/// seeded random order, batches of `opts.batch_size`, AdamW with warmup over the first
/// `warmup_fraction` of the steps then linear decay, layer-wise decay, global-norm clipping at
/// 1.0. `loss_of` gives the mean loss of a batch (indices into the rows). Returns examples/s.
#[allow(clippy::too_many_arguments)]
pub fn train_epochs<M: Trainable>(
    model: &mut M,
    prefix: &str,
    layers: usize,
    rows: usize,
    opts: &FinetuneOptions,
    seed: u64,
    progress: bool,
    mut loss_of: impl FnMut(&M, &[usize]) -> Tensor<1>,
) -> Result<f64> {
    let per_epoch = rows.div_ceil(opts.batch_size);
    let total = (per_epoch * opts.epochs) as u64;
    let warmup = (total as f64 * opts.warmup_fraction).round() as u64;
    let mut opt = AdamW::new(AdamWConfig {
        lr: opts.lr,
        weight_decay: opts.weight_decay,
        warmup_steps: warmup,
        ..AdamWConfig::default()
    });
    let owned_prefix = prefix.to_string();
    let decay = opts.layer_decay;
    let scale = move |name: &str| layer_decay_factor(name, &owned_prefix, layers, decay);
    let bar = progress_bar(
        total,
        "finetune {bar:30} {pos}/{len} steps  {msg}  eta {eta}",
        progress,
    );
    let start = Instant::now();
    let mut seen = 0usize;
    let mut step = 0u64;
    for epoch in 0..opts.epochs {
        let mut order: Vec<usize> = (0..rows).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(
            seed ^ ((epoch as u64 + 1) << 32),
        ));
        for chunk in order.chunks(opts.batch_size) {
            let loss = loss_of(model, chunk);
            let value: f32 = loss.clone().into_scalar::<f32>();
            if !value.is_finite() {
                return Err(Error::Diverged(format!(
                    "fine-tuning step {}: loss is {value}",
                    step + 1
                )));
            }
            let mut grads = Grads::collect(&loss.backward(), |w| model.walk(prefix, w));
            grads.clip_global_norm(1.0);
            let lr = scheduled_lr(opts.lr, step, warmup, total);
            opt.update_scaled(lr, &scale, &grads, |w| model.walk(prefix, w));
            step += 1;
            seen += chunk.len();
            bar.set_message(format!(
                "loss {value:.4}  {:.0} ex/s",
                seen as f64 / start.elapsed().as_secs_f64().max(1e-9)
            ));
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(seen as f64 / start.elapsed().as_secs_f64().max(1e-9))
}

/// What `save_finetuned` writes next to the weights.
#[derive(Serialize, Deserialize)]
pub struct FineTunedInfo {
    pub task: GlueTask,
    pub prefix: String,
    pub config: EncoderConfig,
    pub max_seq_len: usize,
}

pub fn save_finetuned(
    m: &mut FineTuned,
    tokenizer: &WordPieceTokenizer,
    max_seq_len: usize,
    dir: &Path,
) -> Result<()> {
    let info = FineTunedInfo {
        task: m.task,
        prefix: m.prefix.clone(),
        config: m.config.clone(),
        max_seq_len,
    };
    write_model_folder(dir, |w| m.model.walk(&info.prefix, w), &info, tokenizer)
}

pub fn load_finetuned(
    dir: &Path,
    device: &Device,
) -> Result<(FineTuned, WordPieceTokenizer, usize)> {
    let (info, weights, tokenizer) = read_model_folder::<FineTunedInfo>(dir)?;
    let mut model = Classifier::new(
        &info.config.clone().without_dropout(),
        info.task.num_labels(),
        device,
    );
    load_weights(&weights, device, |l| model.walk(&info.prefix, l))?;
    Ok((
        FineTuned {
            model,
            task: info.task,
            prefix: info.prefix,
            config: info.config,
        },
        tokenizer,
        info.max_seq_len,
    ))
}

/// Writes a fine-tuned model folder: `model.safetensors` (the parameters `walk` visits),
/// `finetuned.json` (`info`) and `tokenizer.json`.
pub(crate) fn write_model_folder<I: Serialize>(
    dir: &Path,
    walk: impl FnOnce(&mut dyn ParamWalker),
    info: &I,
    tokenizer: &WordPieceTokenizer,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut ex = Exporter::default();
    walk(&mut ex);
    write_safetensors(&dir.join("model.safetensors"), &ex.tensors, None)?;
    crate::error::write_atomic(
        &dir.join("finetuned.json"),
        serde_json::to_string_pretty(info).expect("json").as_bytes(),
    )?;
    tokenizer.save(&dir.join("tokenizer.json"))
}

/// Loads a fine-tuned model folder's `weights` into the parameters `walk` visits (every one must
/// be there).
pub(crate) fn load_weights(
    weights: &TensorMap,
    device: &Device,
    walk: impl FnOnce(&mut Loader),
) -> Result<()> {
    let mut loader = Loader::new(weights, device);
    walk(&mut loader);
    loader.finish().map(drop)
}

/// The `finetuned.json` of a fine-tuned model folder, parsed as `I`.
pub(crate) fn read_model_info<I: DeserializeOwned>(dir: &Path) -> Result<I> {
    let path = dir.join("finetuned.json");
    serde_json::from_slice(&crate::error::read(&path)?)
        .map_err(|e| Error::Input(format!("{}: {e}", path.display())))
}

/// Reads what [`write_model_folder`] wrote: the info, the weights and the tokenizer.
pub(crate) fn read_model_folder<I: DeserializeOwned>(
    dir: &Path,
) -> Result<(I, TensorMap, WordPieceTokenizer)> {
    let info = read_model_info(dir)?;
    let weights = read_safetensors(&dir.join("model.safetensors"))?;
    let tokenizer = WordPieceTokenizer::load(&dir.join("tokenizer.json"))?;
    Ok((info, weights, tokenizer))
}

/// Token ids and segment ids of one example.
pub type Encoded = (Vec<u32>, Vec<u32>);

/// Each dev file of a task with its examples.
pub type DevSets = Vec<(PathBuf, Vec<GlueExample>)>;

/// Reads train and dev of a GLUE task folder.
pub fn read_task(task: GlueTask, data: &Path) -> Result<(Vec<GlueExample>, DevSets)> {
    let train = read_glue(task, &task.train_file(data))?;
    let mut dev = Vec::new();
    for f in task.dev_files(data) {
        let ex = read_glue(task, &f)?;
        dev.push((f, ex));
    }
    Ok((train, dev))
}
