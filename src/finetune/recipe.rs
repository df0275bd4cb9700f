//! Fine-tuning recipes: the optimizer, learning-rate schedule, layer-wise decay, head and
//! data rules of one reference, chosen as a whole (`--recipe`) and overridable one by one.
//!
//! - `electra` (google-research/electra `finetune/`, `model/optimization.py`): Adam with
//!   decoupled weight decay and **no bias correction**, ε 1e-6, weight decay 0.01 (not on
//!   biases and LayerNorm); learning rate `lr · min(1, t/W) · (1 − t/T)` with W = 10 % of T;
//!   layer-wise decay 0.8 read as the official code reads it (the head 1, the top encoder layer
//!   0.8², the embeddings 0.8^(L+2)); dropout + one dense layer on `[CLS]`; STS-B targets divided
//!   by 5; MRPC and STS-B also trained with the two sentences swapped; global-norm clip 1;
//!   the batch's loss is the **sum** of its examples' losses (`run_finetuning.py` sums the
//!   per-example losses, so with clipping at 1 the summed gradient is clipped nearly every
//!   step); for a Large encoder, lr 5e-5 and layer-wise decay 0.9 (`configure_finetuning.py`).
//! - `transformers` (the `Trainer` of `run_glue.py` / `run_qa.py`): torch's `AdamW` with bias
//!   correction, ε 1e-8, no weight decay, linear decay from the peak (no warmup), no layer-wise
//!   decay; transformers' task heads (`ElectraClassificationHead`); raw STS-B targets; no
//!   swapped pairs; global-norm clip 1; the batch's loss is the **mean** of its examples'.
//!
//! BERT backbones take BERT's pooler (tanh dense on `[CLS]`) under both recipes, as BERT's own
//! code and `BertForSequenceClassification` do.
//!
//! t counts the updates already made (the first update has t = 0), as TensorFlow's
//! `global_step` and torch's `LambdaLR` both do.

use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

pub use super::eval_plan::{EvalEvery, Keep};
use crate::error::rule;
use crate::model::params::ParamWalker;
use crate::tasks::glue::GlueTask;
pub use crate::train::optimizer::product_lr;
use crate::train::optimizer::{AdamW, AdamWConfig, Grads, scheduled_lr};
use crate::{Error, Result};

/// Which reference a fine-tuning run follows (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Recipe {
    #[default]
    Electra,
    Transformers,
}

impl Recipe {
    pub const NAMES: &'static str = "electra or transformers";

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "electra" => Some(Self::Electra),
            "transformers" => Some(Self::Transformers),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Electra => "electra",
            Self::Transformers => "transformers",
        }
    }

    /// How the recipe's reference code cuts a sentence pair: ELECTRA's `_truncate_seq_pair`,
    /// transformers' tokenizer (`run_glue.py`).
    pub fn truncation(self) -> crate::text::pairs::Truncation {
        match self {
            Self::Electra => crate::text::pairs::Truncation::Greedy,
            Self::Transformers => crate::text::pairs::Truncation::LongestFirst,
        }
    }
}

/// How layer-wise learning-rate decay d maps depth to a factor (L encoder layers, layer i
/// counted from 0 at the bottom; the task head always gets 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerDecayRule {
    /// google-research/electra's `_get_layer_lrs` as written: layer i gets d^(L + 1 − i), so
    /// the top layer d², the embeddings d^(L+2) (the off-by-one of electra issue #51).
    #[default]
    Electra,
    /// The same rule one step up (what that code meant): layer i gets d^(L − i), the top layer
    /// d, the embeddings d^(L+1).
    Shifted,
}

impl LayerDecayRule {
    pub const NAMES: &'static str = "electra or shifted";

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "electra" => Some(Self::Electra),
            "shifted" => Some(Self::Shifted),
            _ => None,
        }
    }

    /// The head's depth in the rule's count (the embeddings are depth 0, layer i depth i + 1).
    fn head_depth(self, layers: usize) -> usize {
        match self {
            Self::Electra => layers + 2,
            Self::Shifted => layers + 1,
        }
    }
}

/// The learning-rate schedule over T updates with W warmup updates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// ELECTRA's: `lr · min(1, t/W) · (1 − t/T)`, W = warmup fraction · T (not rounded).
    #[default]
    Product,
    /// transformers' `get_linear_schedule_with_warmup`: `lr · t/W` for t < W, then
    /// `lr · (T − t)/(T − W)`, W = ⌈warmup fraction · T⌉ (the Trainer's rounding).
    Linear,
}

/// How a batch's loss is made of its examples' losses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BatchLoss {
    /// transformers' (`CrossEntropyLoss`'s default reduction): the mean.
    #[default]
    Mean,
    /// google-research/electra's `run_finetuning.py`: the sum.
    Sum,
}

impl BatchLoss {
    pub const NAMES: &'static str = "sum or mean";

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sum" => Some(Self::Sum),
            "mean" => Some(Self::Mean),
            _ => None,
        }
    }
}

/// The classification head on an ELECTRA backbone (BERT backbones always take the pooler).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeadKind {
    /// ELECTRA's: dropout, then one dense layer on the `[CLS]` hidden state.
    #[default]
    Electra,
    /// transformers' `ElectraClassificationHead`: dropout, dense, GELU, dropout, dense.
    Transformers,
}

/// Every hyperparameter of a fine-tuning run (`results.json` records them).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FinetuneOptions {
    /// The recipe the defaults below came from.
    #[serde(default)]
    pub recipe: Recipe,
    pub lr: f64,
    /// Layer-wise learning-rate decay (1 = none).
    pub layer_decay: f64,
    #[serde(default)]
    pub layer_decay_rule: LayerDecayRule,
    pub epochs: usize,
    pub batch_size: usize,
    pub max_seq_len: usize,
    pub warmup_fraction: f64,
    #[serde(default)]
    pub schedule: Schedule,
    pub weight_decay: f64,
    #[serde(default = "default_eps")]
    pub adam_eps: f64,
    /// Adam's bias correction (torch's `AdamW` has it, ELECTRA's optimizer does not).
    #[serde(default = "yes")]
    pub bias_correction: bool,
    /// Global gradient-norm clip (0 = none).
    #[serde(default = "one")]
    pub max_grad_norm: f64,
    /// Use at most this many training examples (0 = all).
    pub max_train_examples: usize,
    /// Unordered sentence pairs (MRPC, STS-B, QQP): also train on (B, A).
    pub both_orders: bool,
    #[serde(default)]
    pub head: HeadKind,
    /// Regression targets are divided by this before the loss (ELECTRA: STS-B's 5), and
    /// predictions multiplied by it.
    #[serde(default = "one")]
    pub regression_scale: f64,
    /// The device to train and predict on (`cpu`, `cuda`, `libtorch-cuda`, … as built).
    #[serde(default = "cpu")]
    pub device: String,
    /// When the dev sets are scored during training.
    #[serde(default)]
    pub eval_every: EvalEvery,
    /// Which model each seed keeps.
    #[serde(default)]
    pub keep: Keep,
    /// Stop a seed after this many evaluations without a better dev score (0 = never).
    #[serde(default)]
    pub early_stop: usize,
    /// `lr` is chosen by the encoder's size ([`FinetuneOptions::for_encoder`]): ELECTRA's
    /// recipe without `--lr`.
    #[serde(default)]
    pub lr_by_size: bool,
    /// The encoder's compute precision (`bf16`: mixed precision, f32 weights and updates).
    #[serde(default)]
    pub precision: crate::model::Precision,
    /// Micro-batches per update: each batch's gradient is summed over this many slices of it,
    /// so the update is the batch's whatever the split (the memory is a slice's).
    #[serde(default = "one_slice")]
    pub grad_accum: usize,
    /// How a batch's loss is made of its examples' (the update's; the logged loss is always
    /// the mean per example).
    #[serde(default)]
    pub batch_loss: BatchLoss,
    /// `layer_decay` is chosen by the encoder's size ([`FinetuneOptions::for_encoder`]):
    /// ELECTRA's recipe without `--layer-decay`.
    #[serde(default)]
    pub layer_decay_by_size: bool,
}

fn one_slice() -> usize {
    1
}

fn cpu() -> String {
    "cpu".into()
}
fn yes() -> bool {
    true
}
pub(crate) fn one() -> f64 {
    1.0
}
fn default_eps() -> f64 {
    1e-6
}

impl FinetuneOptions {
    /// `recipe`'s settings for a sentence(-pair) task.
    pub fn for_task(recipe: Recipe, task: GlueTask) -> Self {
        match recipe {
            Recipe::Electra => Self {
                recipe,
                lr: 1e-4,
                layer_decay: 0.8,
                layer_decay_rule: LayerDecayRule::Electra,
                epochs: task.default_epochs(),
                batch_size: 32,
                max_seq_len: 128,
                warmup_fraction: 0.1,
                schedule: Schedule::Product,
                weight_decay: 0.01,
                adam_eps: 1e-6,
                bias_correction: false,
                max_grad_norm: 1.0,
                max_train_examples: 0,
                both_orders: task.spec().trains_both_orders(),
                head: HeadKind::Electra,
                regression_scale: task.spec().regression_scale(),
                device: cpu(),
                eval_every: EvalEvery::Epoch,
                keep: Keep::Last,
                early_stop: 0,
                lr_by_size: true,
                precision: crate::model::Precision::F32,
                grad_accum: 1,
                batch_loss: BatchLoss::Sum,
                layer_decay_by_size: true,
            },
            Recipe::Transformers => Self {
                recipe,
                lr: 2e-5,
                layer_decay: 1.0,
                layer_decay_rule: LayerDecayRule::Electra,
                epochs: 3,
                batch_size: 32,
                max_seq_len: 128,
                warmup_fraction: 0.0,
                schedule: Schedule::Linear,
                weight_decay: 0.0,
                adam_eps: 1e-8,
                bias_correction: true,
                max_grad_norm: 1.0,
                max_train_examples: 0,
                both_orders: false,
                head: HeadKind::Transformers,
                regression_scale: 1.0,
                device: cpu(),
                eval_every: EvalEvery::Epoch,
                keep: Keep::Last,
                early_stop: 0,
                lr_by_size: false,
                precision: crate::model::Precision::F32,
                grad_accum: 1,
                batch_loss: BatchLoss::Mean,
                layer_decay_by_size: false,
            },
        }
    }

    /// The learning rate the user chose, if any (`--lr`): it replaces the recipe's and, under
    /// ELECTRA's recipe, the choice by the encoder's size. Every command's `--lr` goes through
    /// here, so none can set the rate and leave the size rule to overwrite it.
    pub fn choose_lr(&mut self, lr: Option<f64>) {
        if let Some(lr) = lr {
            self.lr = lr;
            self.lr_by_size = false;
        }
    }

    /// The layer-wise decay the user chose, if any (`--layer-decay`): it replaces the recipe's
    /// and, under ELECTRA's recipe, the choice by the encoder's size.
    pub fn choose_layer_decay(&mut self, decay: Option<f64>) {
        if let Some(d) = decay {
            self.layer_decay = d;
            self.layer_decay_by_size = false;
        }
    }

    /// The options for `encoder`, under ELECTRA's recipe: with
    /// [`lr_by_size`](Self::lr_by_size), the fine-tuning learning rate for the encoder's size
    /// (Small 3e-4 from the paper's Table 7, where `configure_finetuning.py` keeps its default
    /// 1e-4; Base 1e-4; Large 5e-5, as the paper and that file), and with
    /// [`layer_decay_by_size`](Self::layer_decay_by_size) the layer-wise decay (0.8; Large 0.9,
    /// as that file), sizes told apart by the hidden size (up to 256, up to 768, larger); and a
    /// note naming the choice.
    pub fn for_encoder(&self, encoder: &crate::model::EncoderConfig) -> (Self, Option<String>) {
        let mut o = self.clone();
        if !o.lr_by_size && !o.layer_decay_by_size {
            return (o, None);
        }
        let (size, lr, decay) = match encoder.hidden_size {
            0..=256 => ("Small", 3e-4, 0.8),
            257..=768 => ("Base", 1e-4, 0.8),
            _ => ("Large", 5e-5, 0.9),
        };
        let mut chosen = Vec::new();
        if o.lr_by_size {
            o.lr = lr;
            chosen.push(format!("lr {lr:e}"));
        }
        // The decay is named only where the size changes it (Large).
        if o.layer_decay_by_size && decay != o.layer_decay {
            o.layer_decay = decay;
            chosen.push(format!("layer-wise decay {decay}"));
        }
        if chosen.is_empty() {
            return (o, None);
        }
        let note = format!(
            "fine-tuning {}: ELECTRA's for a {size}-size encoder (hidden size {}); --lr and --layer-decay choose others",
            chosen.join(" and "),
            encoder.hidden_size
        );
        (o, Some(note))
    }

    /// ELECTRA's recipe for `task`.
    pub fn electra(task: GlueTask) -> Self {
        Self::for_task(Recipe::Electra, task)
    }

    /// `recipe`'s settings for SQuAD v1.1 (ELECTRA: 2 epochs, 512 tokens; `run_qa.py`'s
    /// example: lr 3e-5, batch 12, 2 epochs, 384 tokens).
    pub fn squad(recipe: Recipe) -> Self {
        let mut o = Self::for_task(recipe, GlueTask::named("sst2"));
        o.both_orders = false;
        o.regression_scale = 1.0;
        o.epochs = 2;
        match recipe {
            Recipe::Electra => o.max_seq_len = 512,
            Recipe::Transformers => {
                o.lr = 3e-5;
                o.batch_size = 12;
                o.max_seq_len = 384;
            }
        }
        o
    }

    /// Checks every value against its range; the error names the option.
    pub fn validate(&self) -> Result<()> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let rules = [
            rule("--lr", self.lr, positive(self.lr), "> 0"),
            rule(
                "--layer-decay",
                self.layer_decay,
                self.layer_decay > 0.0 && self.layer_decay <= 1.0,
                "in (0, 1]",
            ),
            rule("--epochs", self.epochs, self.epochs > 0, "> 0"),
            rule("--batch-size", self.batch_size, self.batch_size > 0, "> 0"),
            rule(
                "--grad-accum",
                self.grad_accum,
                self.grad_accum > 0 && self.grad_accum <= self.batch_size,
                "between 1 and --batch-size",
            ),
            rule(
                "--max-seq-len",
                self.max_seq_len,
                self.max_seq_len >= 8,
                ">= 8",
            ),
            rule(
                "--warmup-fraction",
                self.warmup_fraction,
                (0.0..=1.0).contains(&self.warmup_fraction),
                "in [0, 1]",
            ),
            rule(
                "--weight-decay",
                self.weight_decay,
                self.weight_decay.is_finite() && self.weight_decay >= 0.0,
                ">= 0",
            ),
            rule("--adam-eps", self.adam_eps, positive(self.adam_eps), "> 0"),
            rule(
                "max grad norm",
                self.max_grad_norm,
                self.max_grad_norm.is_finite() && self.max_grad_norm >= 0.0,
                ">= 0",
            ),
            rule(
                "regression scale",
                self.regression_scale,
                positive(self.regression_scale),
                "> 0",
            ),
        ];
        if self.early_stop > 0 && (self.keep != Keep::Best || self.eval_every == EvalEvery::End) {
            return Err(Error::Config(format!(
                "--early-stop {}: needs the dev sets scored during training and the best model kept (--keep best, --eval-every epoch or a number of steps), as transformers' EarlyStoppingCallback does",
                self.early_stop
            )));
        }
        if self.keep == Keep::Best && self.eval_every == EvalEvery::End {
            return Err(Error::Config(
                "--keep best: needs the dev sets scored during training (--eval-every epoch or a number of steps), not only at the end".into(),
            ));
        }
        match rules.into_iter().find(|r| !r.ok) {
            Some(r) => Err(Error::Config(format!(
                "{} {}: must be {}",
                r.field, r.value, r.why
            ))),
            None => Ok(()),
        }
    }

    /// [`validate`](Self::validate), and swapped pairs only where the order carries no
    /// meaning.
    pub fn validate_for(&self, task: GlueTask) -> Result<()> {
        self.validate()?;
        if self.both_orders && !task.is_unordered() {
            return Err(Error::Config(format!(
                "--both-orders: {} is directional (the first text is not the second's equal); only MRPC, STS-B and QQP can be swapped",
                task.dir_name()
            )));
        }
        Ok(())
    }
}

impl FinetuneOptions {
    /// The options against the model they fine-tune: examples fit its position embeddings.
    /// Rows in one forward and backward pass: a batch's slice under gradient accumulation.
    pub fn micro_batch(&self) -> usize {
        self.batch_size.div_ceil(self.grad_accum)
    }

    pub fn check_model(&self, model: &crate::model::EncoderConfig) -> Result<()> {
        check_length(self.max_seq_len, model)
    }
}

/// Examples of `max_seq_len` tokens fit `model`'s position embeddings.
pub fn check_length(max_seq_len: usize, model: &crate::model::EncoderConfig) -> Result<()> {
    let positions = model.max_position_embeddings;
    if max_seq_len > positions {
        return Err(Error::Config(format!(
            "--max-seq-len {max_seq_len}: the model has {positions} positions (max_position_embeddings); pass --max-seq-len {positions} or less"
        )));
    }
    Ok(())
}

/// Learning-rate factor of a parameter (transformers name) under layer-wise decay `decay`:
/// see [`LayerDecayRule`]. Embeddings (and their projection) are depth 0, encoder layer i is
/// depth i + 1, everything else (pooler, heads) is the head.
pub fn layer_decay_factor(
    name: &str,
    prefix: &str,
    layers: usize,
    decay: f64,
    rule: LayerDecayRule,
) -> f64 {
    let head = rule.head_depth(layers);
    let depth = if let Some(rest) = name.strip_prefix(&format!("{prefix}.encoder.layer.")) {
        rest.split('.')
            .next()
            .and_then(|s| s.parse::<usize>().ok())
            .map_or(head, |i| i.min(layers - 1) + 1)
    } else if name.starts_with(&format!("{prefix}.embeddings")) {
        0
    } else {
        head
    };
    decay.powi((head - depth) as i32)
}

/// The optimizer of one fine-tuning run: clipping, the schedule, layer-wise decay and the
/// AdamW update of the recipe.
pub struct FinetuneOptimizer {
    opt: AdamW,
    opts: FinetuneOptions,
    prefix: String,
    layers: usize,
    total: u64,
    step: u64,
}

impl FinetuneOptimizer {
    /// For `total` updates of a model whose encoder has `layers` layers under `prefix`.
    pub fn new(opts: &FinetuneOptions, prefix: &str, layers: usize, total: u64) -> Self {
        let opt = AdamW::new(AdamWConfig {
            lr: opts.lr,
            eps: opts.adam_eps,
            weight_decay: opts.weight_decay,
            bias_correction: opts.bias_correction,
            max_grad_norm: opts.max_grad_norm,
            ..AdamWConfig::default()
        });
        Self {
            opt,
            opts: opts.clone(),
            prefix: prefix.into(),
            layers,
            total,
            step: 0,
        }
    }

    /// The learning rate of the next update (before layer-wise factors).
    pub fn lr(&self) -> f64 {
        let (o, t, total) = (&self.opts, self.step, self.total);
        match o.schedule {
            Schedule::Product => product_lr(o.lr, t, o.warmup_fraction * total as f64, total),
            Schedule::Linear => {
                let warmup = (o.warmup_fraction * total as f64).ceil() as u64;
                scheduled_lr(o.lr, t, warmup, total)
            }
        }
    }

    /// Clips `grads`, then updates every parameter `walk` visits; returns the norm before
    /// clipping.
    pub fn update(&mut self, mut grads: Grads, walk: impl FnMut(&mut dyn ParamWalker)) -> f64 {
        let norm = grads
            .clip_global_norm(self.opts.max_grad_norm)
            .map_or(0.0, |n| crate::kernels::read_floats(n)[0]);
        let lr = self.lr();
        let (prefix, layers) = (self.prefix.clone(), self.layers);
        let (decay, rule) = (self.opts.layer_decay, self.opts.layer_decay_rule);
        let scale = move |name: &str| layer_decay_factor(name, &prefix, layers, decay, rule);
        self.opt.update_scaled(lr, &scale, &grads, walk);
        self.step += 1;
        norm
    }
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
