//! Fine-tuning on GLUE: a classification / regression head on the `[CLS]` hidden state
//! (dropout + linear, as in ELECTRA's fine-tuning code) over a pre-trained encoder, trained
//! with ELECTRA's recipe: AdamW, warmup over the first 10 % of steps then linear decay,
//! layer-wise learning-rate decay (the top layer gets factor 1, each layer below × decay, the
//! embeddings the lowest factor decay^L), several seeds.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use super::pretrained::PretrainedEncoder;
use super::recipe::{FinetuneOptions, HeadKind, progress_bar};
use super::record::TrainingRecord;
use super::scores::check_metric_defined;
use super::scores::{Scores, merge_dev_scores, score_file};
use super::train_loop::{Epochs, Trainable, Trained, Tuned, Watch, train_epochs};
use crate::interop::tensors::Loader;
use crate::kernels::dropout::dropout;
use crate::model::encoder::{Embeddings, Encoder};
use crate::model::params::{ParamWalker, walk_linear};
use crate::model::{EncoderConfig, Inputs};
use crate::tasks::glue::{GlueExample, GlueTask, Label, read_glue};
use crate::text::WordPieceTokenizer;
use crate::text::pairs::{Truncation, encode_pair};
use crate::{Error, Result};

/// The layers between the `[CLS]` hidden state and the logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClsHead {
    /// ELECTRA's fine-tuning head: dropout, dense (`classifier`).
    Linear,
    /// transformers' `ElectraClassificationHead`: dropout, dense, GELU, dropout, dense
    /// (`classifier.dense`, `classifier.out_proj`).
    ElectraTransformers,
    /// BERT's: the pooler (tanh dense, `bert.pooler.dense`), dropout, dense (`classifier`).
    BertPooler,
}

impl ClsHead {
    /// The head of a backbone (`electra` or `bert`) under the recipe's ELECTRA head choice.
    pub fn of(prefix: &str, electra: HeadKind) -> Self {
        match (prefix, electra) {
            ("bert", _) => Self::BertPooler,
            (_, HeadKind::Electra) => Self::Linear,
            (_, HeadKind::Transformers) => Self::ElectraTransformers,
        }
    }
}

/// Encoder + `[CLS]` head.
#[derive(Module, Debug)]
pub struct Classifier {
    pub embeddings: Embeddings,
    pub encoder: Encoder,
    pub dropout: Dropout,
    /// The first dense layer of a two-layer head (the BERT pooler or transformers' ELECTRA
    /// head's `dense`).
    pub inner: Option<Linear>,
    pub head: Linear,
    #[module(skip)]
    pub kind: ClsHead,
}

impl Classifier {
    pub fn new(c: &EncoderConfig, outputs: usize, kind: ClsHead, device: &Device) -> Self {
        let d = c.hidden_size;
        Self {
            embeddings: Embeddings::new(c, device).with_frozen_pad(c.pad_token_id),
            encoder: Encoder::new(c, device),
            dropout: DropoutConfig::new(c.hidden_dropout_prob).init(),
            inner: (kind != ClsHead::Linear).then(|| crate::model::encoder::linear(d, d, device)),
            head: crate::model::encoder::linear(d, outputs, device),
            kind,
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
        let drop = |t| dropout(&self.dropout, t);
        let x = match (&self.inner, self.kind) {
            (Some(pool), ClsHead::BertPooler) => drop(pool.forward(cls).tanh()),
            (Some(dense), _) => drop(crate::kernels::gelu(dense.forward(drop(cls)))),
            (None, _) => drop(cls),
        };
        self.head.forward(x)
    }

    /// The encoder's parameters under `prefix`.
    pub fn walk_encoder(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        self.embeddings.walk(&format!("{prefix}.embeddings"), w);
        self.encoder.walk(prefix, w);
    }

    /// The head's parameters, under transformers' names.
    pub fn walk_head(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        match (&mut self.inner, self.kind) {
            (Some(pool), ClsHead::BertPooler) => {
                walk_linear(w, &format!("{prefix}.pooler.dense"), pool);
                walk_linear(w, "classifier", &mut self.head);
            }
            (Some(dense), _) => {
                walk_linear(w, "classifier.dense", dense);
                walk_linear(w, "classifier.out_proj", &mut self.head);
            }
            (None, _) => walk_linear(w, "classifier", &mut self.head),
        }
    }

    pub fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        self.walk_encoder(prefix, w);
        self.walk_head(prefix, w);
    }

    /// A classifier over `pre`'s encoder (its weights loaded) with a fresh head of `opts`'s
    /// kind, computing in `opts`'s precision; BERT's pooler is taken from `pre` when it has
    /// one, as transformers does.
    pub fn from_pretrained(
        pre: &PretrainedEncoder,
        outputs: usize,
        opts: &FinetuneOptions,
        device: &Device,
    ) -> Result<Self> {
        let kind = ClsHead::of(&pre.prefix, opts.head);
        let config = pre.config.clone().with_precision(opts.precision);
        let mut model = Classifier::new(&config, outputs, kind, device);
        let mut loader = Loader::new(&pre.weights, device);
        // A model that holds this very head (a fine-tuned model, or a transformers folder of
        // the same head and labels) keeps it and continues, as transformers' `from_pretrained`
        // keeps a head whose shapes fit; any other starts with a new head.
        let mut shapes = crate::model::params::FileShapes::default();
        model.walk(&pre.prefix, &mut shapes);
        let whole = shapes.0.iter().all(|(name, shape)| {
            pre.weights
                .tensors
                .get(name)
                .is_some_and(|w| &w.shape == shape)
        });
        if whole {
            tracing::info!(
                "{}: its classification head ({outputs} outputs) is kept: fine-tuning continues from it",
                pre.source.model.display()
            );
            model.walk(&pre.prefix, &mut loader);
            loader.finish()?;
            return Ok(model);
        }
        model.walk_encoder(&pre.prefix, &mut loader);
        let pooler = format!("{}.pooler.dense", pre.prefix);
        if let (ClsHead::BertPooler, Some(pool)) = (kind, &mut model.inner)
            && pre
                .weights
                .tensors
                .contains_key(&format!("{pooler}.weight"))
        {
            walk_linear(&mut loader, &pooler, pool);
        }
        loader.finish()?;
        Ok(model)
    }
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

/// A fine-tuned model with what `evaluate` needs to use it again.
pub struct FineTuned {
    pub model: Classifier,
    pub task: GlueTask,
    pub prefix: String,
    pub config: EncoderConfig,
    /// Regression outputs are multiplied by this (the recipe's target scale).
    pub regression_scale: f64,
    /// How pairs longer than the model takes were cut in training (and are in prediction).
    pub truncation: Truncation,
}

/// Rows predicted in one forward pass.
pub const PREDICT_BATCH: usize = 64;

/// A model's predictions on examples: a class (or score) each, the rate, and the mean loss per
/// example when every example is labelled (by the training loss's function, in the same pass).
pub struct Predicted {
    pub values: Vec<f64>,
    pub examples_per_s: f64,
    pub loss: Option<f64>,
}

/// Predicts `examples` in batches of [`PREDICT_BATCH`].
pub fn predict(
    m: &FineTuned,
    tokenizer: &WordPieceTokenizer,
    examples: &[GlueExample],
    max_len: usize,
    device: &Device,
    progress: bool,
) -> Predicted {
    let start = Instant::now();
    let bar = progress_bar(
        examples.len() as u64,
        "evaluate {bar:30} {pos}/{len} {per_sec} eta {eta}",
        progress,
    );
    let loss = std::cell::Cell::new((0.0, 0));
    let at = Predicting {
        max_len,
        batch: PREDICT_BATCH,
        device,
        bar: &bar,
        loss: Some(&loss),
    };
    let values = predict_rows(m, tokenizer, examples, &at);
    bar.finish_and_clear();
    let (sum, n) = loss.get();
    Predicted {
        values,
        examples_per_s: examples.len() as f64 / start.elapsed().as_secs_f64().max(1e-9),
        loss: (n > 0 && n == examples.len()).then(|| sum / n as f64),
    }
}

/// How rows are predicted: their length, the batch size, the device and the bar they advance;
/// and where the loss of labelled rows is summed, when it is wanted (the sum of the examples'
/// losses, the examples).
pub struct Predicting<'a> {
    pub max_len: usize,
    pub batch: usize,
    pub device: &'a Device,
    pub bar: &'a ProgressBar,
    pub loss: Option<&'a std::cell::Cell<(f64, usize)>>,
}

/// Predicted class (or score) per example of `examples`, in batches of `at.batch`.
pub fn predict_rows(
    m: &FineTuned,
    tokenizer: &WordPieceTokenizer,
    examples: &[GlueExample],
    at: &Predicting,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(examples.len());
    for chunk in examples.chunks(at.batch) {
        let rows: Vec<_> = chunk
            .iter()
            .map(|e| {
                let b = e.text_b.as_deref();
                encode_pair(tokenizer, &e.text_a, b, at.max_len, m.truncation)
            })
            .collect();
        let logits = m
            .model
            .forward(&batch_inputs(&rows, tokenizer.special.pad, at.device));
        let gold: Vec<Label> = chunk.iter().filter_map(|e| e.label).collect();
        if let Some(sum) = at.loss
            && gold.len() == chunk.len()
        {
            // The training loss's own function, on the same scaled targets.
            let regression = m.task.is_regression();
            let mean = classifier_loss(logits.clone(), &gold, regression, m.regression_scale)
                .into_scalar::<f32>() as f64;
            let (s, n) = sum.get();
            sum.set((s + mean * gold.len() as f64, n + gold.len()));
        }
        if m.task.is_regression() {
            out.extend(
                logits
                    .into_data()
                    .convert::<f32>()
                    .try_into_vec::<f32>()
                    .expect("f32")
                    .into_iter()
                    .map(|v| v as f64 * m.regression_scale),
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
        at.bar.inc(chunk.len() as u64);
    }
    out
}

/// The training rows of `train`: encoded pairs with their labels, the first
/// `max_train_examples` labelled examples, each also as (B, A) when `both_orders`.
pub fn training_rows(
    tokenizer: &WordPieceTokenizer,
    train: &[GlueExample],
    opts: &FinetuneOptions,
) -> Vec<(Encoded, Label)> {
    let mut rows = Vec::new();
    for e in training_examples(train, opts) {
        let label = e.label.expect("labelled");
        let (a, b) = (&e.text_a, e.text_b.as_deref());
        let rule = opts.recipe.truncation();
        rows.push((encode_pair(tokenizer, a, b, opts.max_seq_len, rule), label));
        if opts.both_orders
            && let Some(b) = b
        {
            let swapped = encode_pair(tokenizer, b, Some(a), opts.max_seq_len, rule);
            rows.push((swapped, label));
        }
    }
    rows
}

/// The examples fine-tuning trains on: the first `max_train_examples` labelled ones (all with
/// 0).
pub fn training_examples<'a>(
    train: &'a [GlueExample],
    opts: &FinetuneOptions,
) -> impl Iterator<Item = &'a GlueExample> {
    let take = match opts.max_train_examples {
        0 => usize::MAX,
        n => n,
    };
    train.iter().filter(|e| e.label.is_some()).take(take)
}

/// The mean loss of a batch of logits against `gold`: cross-entropy for classes, squared
/// error against the score divided by `regression_scale` for regression.
pub fn classifier_loss(
    logits: Tensor<2>,
    gold: &[Label],
    regression: bool,
    regression_scale: f64,
) -> Tensor<1> {
    let device = logits.device();
    let n = gold.len();
    if regression {
        let g: Vec<f32> = gold
            .iter()
            .map(|l| match *l {
                Label::Score(s) => (s / regression_scale) as f32,
                Label::Class(c) => (c as f64 / regression_scale) as f32,
            })
            .collect();
        let g = Tensor::<1>::from_data(TensorData::new(g, [n]), &device);
        (logits.reshape([n]) - g).square().mean()
    } else {
        let g: Vec<i64> = gold
            .iter()
            .map(|l| match *l {
                Label::Class(c) => c as i64,
                Label::Score(s) => s as i64,
            })
            .collect();
        let g = Tensor::<1, Int>::from_data(TensorData::new(g, [n]), &device);
        log_softmax(logits, 1)
            .gather(1, g.reshape([n, 1]))
            .neg()
            .mean()
    }
}

/// One seed's fine-tuning of a sentence(-pair) task: the encoder it starts from, its training
/// examples, its options and seed, and what it reports to: the seed's record and, when given,
/// the dev sets it scores as the options' evaluation plan says.
pub struct SeedTraining<'a> {
    pub task: GlueTask,
    pub pre: &'a PretrainedEncoder,
    pub train: &'a [GlueExample],
    pub opts: &'a FinetuneOptions,
    pub seed: u64,
    pub progress: bool,
    pub record: &'a mut TrainingRecord,
    pub dev: Option<&'a DevSets>,
}

/// What a seed's training gives: the model it keeps (the last, or the best under
/// `--keep best`), the training rate, the update it was kept at and the updates made.
pub struct SeedModel {
    pub model: FineTuned,
    pub examples_per_s: f64,
    pub kept_step: u64,
    pub steps: u64,
    pub stopped_early: bool,
}

/// The dev sets' scores of one model: each file's, and the task's over them all
/// ([`merge_dev_scores`]: the first file's score, the others' metrics beside it).
pub struct DevScores {
    pub per_file: Vec<Scores>,
    pub merged: Scores,
    pub examples_per_s: f64,
}

/// Predicts and scores every dev file of `dev` with `ft`.
pub fn score_dev(
    ft: &FineTuned,
    tok: &WordPieceTokenizer,
    dev: &DevSets,
    max_len: usize,
    progress: bool,
) -> Result<DevScores> {
    let device = ft.model.devices().into_iter().next().unwrap_or_default();
    let mut per_file = Vec::new();
    let mut rate = 0.0;
    for (file, ex) in dev {
        let p = predict(ft, tok, ex, max_len, &device, progress);
        rate += p.examples_per_s / dev.len() as f64;
        let mut scores = score_file(ft.task, file, ex, &p.values)?;
        scores.loss = p.loss;
        per_file.push(scores);
    }
    let files: Vec<&std::path::Path> = dev.iter().map(|(f, _)| f.as_path()).collect();
    Ok(DevScores {
        merged: merge_dev_scores(&files, per_file.clone()),
        per_file,
        examples_per_s: rate,
    })
}

/// Fine-tunes on `s.train` with one seed.
pub fn finetune_one(s: SeedTraining) -> Result<SeedModel> {
    let SeedTraining {
        task,
        pre,
        train,
        opts,
        seed,
        progress,
        record,
        dev,
    } = s;
    opts.validate_for(task)?;
    opts.check_model(&pre.config)?;
    let base = crate::device::device_for(&opts.device)?;
    crate::model::seed(&base, seed);
    let device = base.clone().autodiff();
    let mut model = Classifier::from_pretrained(pre, task.num_labels(), opts, &device)?;
    let rows = training_rows(&pre.tokenizer, train, opts);
    if rows.is_empty() {
        return Err(Error::Input("no labelled training examples".into()));
    }
    let scale = if task.is_regression() {
        opts.regression_scale
    } else {
        1.0
    };
    let finetuned = |model: Classifier| FineTuned {
        model,
        task,
        prefix: pre.prefix.clone(),
        config: pre.config.clone(),
        regression_scale: scale,
        truncation: opts.recipe.truncation(),
    };
    let mut evaluate = |m: &Classifier| -> Result<Scores> {
        let dev = dev.expect("evaluated only with dev sets");
        let model = finetuned(m.valid());
        Ok(score_dev(&model, &pre.tokenizer, dev, opts.max_seq_len, false)?.merged)
    };
    let tuned = Tuned {
        model: &mut model,
        prefix: &pre.prefix,
        layers: pre.config.num_hidden_layers,
    };
    let plan = Epochs {
        rows: rows.len(),
        seed,
        progress,
    };
    let watch = Watch {
        record,
        evaluate: dev
            .is_some()
            .then_some(&mut evaluate as &mut dyn FnMut(&Classifier) -> Result<Scores>),
    };
    let trained: Trained<Classifier> = train_epochs(tuned, opts, plan, watch, |model, chunk| {
        let enc: Vec<_> = chunk.iter().map(|&i| rows[i].0.clone()).collect();
        let gold: Vec<Label> = chunk.iter().map(|&i| rows[i].1).collect();
        let x = batch_inputs(&enc, pre.tokenizer.special.pad, &device);
        classifier_loss(model.forward(&x), &gold, task.is_regression(), scale)
    })?;
    let (kept, kept_step) = match trained.best {
        Some(b) => (b.model, b.step),
        None => (model, trained.steps),
    };
    Ok(SeedModel {
        model: finetuned(kept.valid()),
        examples_per_s: trained.examples_per_s,
        kept_step,
        steps: trained.steps,
        stopped_early: trained.stopped_early,
    })
}

impl Trainable for Classifier {
    fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        Classifier::walk(self, prefix, w)
    }
}

/// Token ids and segment ids of one example.
pub type Encoded = (Vec<u32>, Vec<u32>);

/// Each dev file of a task with its examples.
pub type DevSets = Vec<(PathBuf, Vec<GlueExample>)>;

/// Reads train and dev of a GLUE task folder.
pub fn read_task(task: GlueTask, data: &Path) -> Result<(Vec<GlueExample>, DevSets)> {
    let train_file = task.train_file(data);
    let train = read_glue(task, &train_file)?;
    if !train.iter().any(|e| e.label.is_some()) {
        return Err(Error::Input(format!(
            "{}: no labelled training examples",
            train_file.display()
        )));
    }
    let mut dev = Vec::new();
    for f in task.dev_files(data) {
        let ex = read_glue(task, &f)?;
        if ex.is_empty() || ex.iter().any(|e| e.label.is_none()) {
            return Err(Error::Input(format!(
                "{}: a dev file needs labelled examples ({} read, {} labelled)",
                f.display(),
                ex.len(),
                ex.iter().filter(|e| e.label.is_some()).count()
            )));
        }
        let labels: Vec<Option<Label>> = ex.iter().map(|e| e.label).collect();
        check_metric_defined(task, &f, &labels)?;
        dev.push((f, ex));
    }
    Ok((train, dev))
}
