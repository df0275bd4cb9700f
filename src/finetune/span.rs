//! SQuAD v1.1 span extraction: question + context windows → answer spans, with one of two
//! heads over the encoder's hidden states ([`SpanHeadKind`]):
//! - `transformers`: a `qa_outputs` linear layer giving independent start and end logits, as
//!   transformers' `ElectraForQuestionAnswering`, trained with the mean of the start and end
//!   cross-entropies over every position;
//! - `electra-joint`: ELECTRA's joint head (end conditioned on the start, beam decoding, an
//!   answerability classifier; `joint_span.rs`), the ELECTRA recipe's.
//!
//! The model reads the windows of `qa_features.rs`; prediction applies each head's decoding
//! rule (`span_decode.rs`) with BERT's max-context rule. The best pair over all windows of a question is the answer, cut from
//! the context between the start token's first and the end token's last character: sub-word
//! precision, as BERT's `get_final_text` gives ("1990" from the "1990s" of "199 ##0 ##s" when
//! the span ends on "##0").

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use burn::module::Module;
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use serde::{Deserialize, Serialize};

use crate::finetune::folder::{
    load_weights, read_model_folder, read_model_info, write_model_folder,
};
use crate::finetune::joint_span::{JointSpanHead, JointTargets};
use crate::finetune::pretrained::PretrainedEncoder;
use crate::finetune::qa_features::{QaFeature, QaOptions, make_features};
use crate::finetune::recipe::{FinetuneOptions, HeadKind, progress_bar};
use crate::finetune::span_decode::{best_joint_span, best_span};
use crate::finetune::train_loop::{Epochs, Trainable, Tuned, Watch, train_epochs};
use crate::interop::tensors::{HostTensor, Loader};
use crate::model::encoder::{Embeddings, Encoder};
use crate::model::params::{ParamWalker, walk_linear};
use crate::model::{EncoderConfig, Inputs};
use crate::tasks::squad::SquadExample;
use crate::tasks::task::Task;
use crate::text::WordPieceTokenizer;
use crate::{Error, Result};

/// Which head reads the hidden states.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpanHeadKind {
    /// transformers' `qa_outputs` (hidden → 2: start, end); what models saved before the
    /// joint head existed hold.
    #[default]
    Transformers,
    /// ELECTRA's joint head.
    ElectraJoint,
}

impl SpanHeadKind {
    /// The recipe's head choice: ELECTRA's gives its joint head, on any backbone.
    pub fn of(head: HeadKind) -> Self {
        match head {
            HeadKind::Electra => Self::ElectraJoint,
            HeadKind::Transformers => Self::Transformers,
        }
    }
}

/// The layers over the hidden states. One per model, so the variants' sizes do not matter
/// (burn's `Module` derive takes no `Box`).
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum SpanHead {
    Transformers(Linear),
    ElectraJoint(JointSpanHead),
}

/// Encoder + span head.
#[derive(Module, Debug)]
pub struct SpanExtractor {
    pub embeddings: Embeddings,
    pub encoder: Encoder,
    pub head: SpanHead,
}

impl SpanExtractor {
    pub fn new(c: &EncoderConfig, kind: SpanHeadKind, device: &Device) -> Self {
        let d = c.hidden_size;
        Self {
            embeddings: Embeddings::new(c, device).with_frozen_pad(c.pad_token_id),
            encoder: Encoder::new(c, device),
            head: match kind {
                SpanHeadKind::Transformers => {
                    SpanHead::Transformers(crate::model::encoder::linear(d, 2, device))
                }
                SpanHeadKind::ElectraJoint => SpanHead::ElectraJoint(JointSpanHead::new(d, device)),
            },
        }
    }

    pub fn kind(&self) -> SpanHeadKind {
        match self.head {
            SpanHead::Transformers(_) => SpanHeadKind::Transformers,
            SpanHead::ElectraJoint(_) => SpanHeadKind::ElectraJoint,
        }
    }

    /// The encoder's last hidden states [batch, len, hidden].
    pub fn hidden(&self, x: &Inputs) -> Tensor<3> {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        self.encoder.forward(e, x.attention_mask.clone())
    }

    /// Start and end logits of transformers' head, each [batch, len], at every position
    /// (padding included, as `ElectraForQuestionAnswering` gives them; decoding only reads
    /// context tokens). Panics on the joint head, whose end logits need a start.
    pub fn logits(&self, x: &Inputs) -> (Tensor<2>, Tensor<2>) {
        let SpanHead::Transformers(head) = &self.head else {
            panic!("the joint head's end logits are conditioned on a start: use `beam`")
        };
        let h = self.hidden(x);
        let [b, l, _] = h.dims();
        let logits = head.forward(h);
        let start = logits.clone().slice([0..b, 0..l, 0..1]).reshape([b, l]);
        let end = logits.slice([0..b, 0..l, 1..2]).reshape([b, l]);
        (start, end)
    }

    /// The training loss of a batch of windows under the head's own rule.
    pub fn loss(&self, x: &Inputs, fs: &[&QaFeature]) -> Tensor<1> {
        let starts: Vec<usize> = fs.iter().map(|f| f.start).collect();
        let ends: Vec<usize> = fs.iter().map(|f| f.end).collect();
        match &self.head {
            SpanHead::Transformers(_) => {
                let (start, end) = self.logits(x);
                span_loss(start, end, &starts, &ends)
            }
            SpanHead::ElectraJoint(head) => {
                let out = head.train_outputs(self.hidden(x), x, &starts);
                // SQuAD v1.1: every question has an answer.
                let impossible = vec![false; fs.len()];
                let targets = JointTargets {
                    start: &starts,
                    end: &ends,
                    impossible: &impossible,
                };
                JointSpanHead::loss(out, &targets)
            }
        }
    }

    pub fn walk_encoder(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        self.embeddings.walk(&format!("{prefix}.embeddings"), w);
        self.encoder.walk(prefix, w);
    }
}

impl Trainable for SpanExtractor {
    fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        self.walk_encoder(prefix, w);
        match &mut self.head {
            SpanHead::Transformers(head) => walk_linear(w, "qa_outputs", head),
            SpanHead::ElectraJoint(head) => head.walk(w),
        }
    }
}

fn batch(features: &[&QaFeature], pad: u32, device: &Device) -> Inputs {
    let rows: Vec<(Vec<u32>, Vec<u32>)> = features
        .iter()
        .map(|f| (f.ids.clone(), f.types.clone()))
        .collect();
    crate::finetune::classify::batch_inputs(&rows, pad, device)
}

/// A fine-tuned SQuAD model.
pub struct QaModel {
    pub model: SpanExtractor,
    pub prefix: String,
    pub config: EncoderConfig,
    pub options: QaOptions,
}

/// Fine-tunes a span extractor on `train` with one seed, its loss recorded in `record` (the
/// dev set is scored after training); returns it and how training went.
pub fn finetune_squad(
    pre: &PretrainedEncoder,
    train: &[SquadExample],
    opts: &FinetuneOptions,
    qa: &QaOptions,
    seed: u64,
    progress: bool,
    record: &mut crate::finetune::record::TrainingRecord,
) -> Result<(QaModel, crate::finetune::record::SeedTrained)> {
    crate::finetune::recipe::check_length(qa.max_seq_len, &pre.config)?;
    let base = crate::device::device_for(&opts.device)?;
    crate::model::seed(&base, seed);
    let device = base.clone().autodiff();
    let config = pre.config.clone().with_precision(opts.precision);
    let mut model = SpanExtractor::new(&config, SpanHeadKind::of(opts.head), &device);
    let mut loader = Loader::new(&pre.weights, &device);
    model.walk_encoder(&pre.prefix, &mut loader);
    loader.finish()?;
    let train = if opts.max_train_examples > 0 {
        &train[..opts.max_train_examples.min(train.len())]
    } else {
        train
    };
    let features = make_features(&pre.tokenizer, train, qa)?;
    if features.is_empty() {
        return Err(Error::Input("no SQuAD training questions".into()));
    }
    let pad = pre.tokenizer.special.pad;
    let tuned = Tuned {
        model: &mut model,
        prefix: &pre.prefix,
        layers: pre.config.num_hidden_layers,
    };
    let plan = Epochs {
        rows: features.len(),
        seed,
        progress,
    };
    let watch = Watch {
        record,
        evaluate: None,
    };
    let trained = train_epochs(tuned, opts, plan, watch, |model, chunk| {
        let fs: Vec<&QaFeature> = chunk.iter().map(|&i| &features[i]).collect();
        model.loss(&batch(&fs, pad, &device), &fs)
    })?;
    Ok((
        QaModel {
            model: model.valid(),
            prefix: pre.prefix.clone(),
            config: pre.config.clone(),
            options: qa.clone(),
        },
        crate::finetune::record::SeedTrained {
            train_examples_per_s: trained.examples_per_s,
            steps: trained.steps,
            kept_step: trained.steps,
            stopped_early: false,
        },
    ))
}

/// The mean of the start and end cross-entropies over the batch, every position a candidate
/// (transformers' `ElectraForQuestionAnswering` loss).
pub fn span_loss(
    start: Tensor<2>,
    end: Tensor<2>,
    gold_start: &[usize],
    gold_end: &[usize],
) -> Tensor<1> {
    let device = start.device();
    let n = gold_start.len();
    let gold = |v: &[usize]| {
        let v: Vec<i64> = v.iter().map(|&x| x as i64).collect();
        Tensor::<1, Int>::from_data(TensorData::new(v, [n]), &device).reshape([n, 1])
    };
    let ls = log_softmax(start, 1).gather(1, gold(gold_start)).mean();
    let le = log_softmax(end, 1).gather(1, gold(gold_end)).mean();
    (ls + le).neg().div_scalar(2.0)
}

/// Each window's best answer (score, byte range in the context) by the model's head.
fn window_answers(m: &QaModel, x: &Inputs, fs: &[&QaFeature]) -> Vec<Option<(f32, usize, usize)>> {
    let o = &m.options;
    match &m.model.head {
        SpanHead::Transformers(_) => {
            let (s, e) = m.model.logits(x);
            let len = s.dims()[1];
            let (s, e) = (
                HostTensor::from_tensor(s).values,
                HostTensor::from_tensor(e).values,
            );
            fs.iter()
                .enumerate()
                .map(|(k, f)| {
                    let row = k * len..k * len + f.ids.len();
                    best_span(f, &s[row.clone()], &e[row], o.n_best, o.max_answer_len)
                })
                .collect()
        }
        SpanHead::ElectraJoint(head) => {
            let beam = head.beam(m.model.hidden(x), x, o.beam);
            fs.iter()
                .enumerate()
                .map(|(k, f)| best_joint_span(f, beam.window(k), o.max_answer_len))
                .collect()
        }
    }
}

/// Answers (id → text) for `examples`, with questions/s.
/// The answer of a question none of whose windows has a valid span: the string "empty", as
/// google-research/electra's `qa_metrics.py` and transformers' `run_qa` post-processing
/// (`utils_qa.py`) both answer.
pub const NO_ANSWER: &str = "empty";

/// A question's answer: the context's bytes `span`, or [`NO_ANSWER`] without one.
pub fn answer_text(e: &SquadExample, span: Option<std::ops::Range<usize>>) -> String {
    span.map_or_else(|| NO_ANSWER.to_string(), |r| e.context[r].to_string())
}

pub fn predict_squad(
    m: &QaModel,
    tok: &WordPieceTokenizer,
    examples: &[SquadExample],
    device: &Device,
    progress: bool,
) -> Result<(HashMap<String, String>, f64)> {
    let started = Instant::now();
    let features = make_features(tok, examples, &m.options)?;
    let bar = progress_bar(
        features.len() as u64,
        "evaluate {bar:30} {pos}/{len} windows {per_sec} eta {eta}",
        progress,
    );
    let mut best: Vec<Option<(f32, usize, usize)>> = vec![None; examples.len()];
    for chunk in features.chunks(32) {
        let fs: Vec<&QaFeature> = chunk.iter().collect();
        let windows = window_answers(m, &batch(&fs, tok.special.pad, device), &fs);
        for (f, cand) in chunk.iter().zip(windows) {
            if let Some(c) = cand
                && best[f.example].is_none_or(|b| c.0 > b.0)
            {
                best[f.example] = Some(c);
            }
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    let answers = examples
        .iter()
        .zip(best)
        .map(|(e, b)| (e.id.clone(), answer_text(e, b.map(|(_, a, z)| a..z))))
        .collect();
    Ok((
        answers,
        examples.len() as f64 / started.elapsed().as_secs_f64().max(1e-9),
    ))
}

/// What `save_qa` writes next to the weights.
#[derive(Serialize, Deserialize)]
pub(crate) struct QaInfo {
    pub task: Task,
    /// Absent in folders written before the joint head: transformers' head.
    #[serde(default)]
    pub head: SpanHeadKind,
    pub prefix: String,
    pub config: EncoderConfig,
    pub options: QaOptions,
}

pub fn save_qa(m: &mut QaModel, tok: &WordPieceTokenizer, dir: &Path) -> Result<()> {
    let info = QaInfo {
        task: Task::Squad,
        head: m.model.kind(),
        prefix: m.prefix.clone(),
        config: m.config.clone(),
        options: m.options.clone(),
    };
    write_model_folder(dir, |w| m.model.walk(&info.prefix, w), &info, tok)
}

pub fn load_qa(dir: &Path, device: &Device) -> Result<(QaModel, WordPieceTokenizer)> {
    let (info, weights, tok) = read_model_folder::<QaInfo>(dir)?;
    if info.task != Task::Squad {
        return Err(Error::Input(format!(
            "{}: field `task` is {}, not a SQuAD model",
            dir.join("finetuned.json").display(),
            String::from(info.task)
        )));
    }
    super::pretrained::check_model_fits(&info.config, &dir.join("finetuned.json"))?;
    let mut model = SpanExtractor::new(&info.config.clone().without_dropout(), info.head, device);
    load_weights(&weights, device, |l| model.walk(&info.prefix, l))?;
    Ok((
        QaModel {
            model,
            prefix: info.prefix,
            config: info.config,
            options: info.options,
        },
        tok,
    ))
}

/// The task a fine-tuned model folder was trained on (its `finetuned.json`'s `task`).
pub fn finetuned_task(dir: &Path) -> Result<Task> {
    #[derive(Deserialize)]
    struct Info {
        task: Task,
    }
    let config = dir.join("config.json");
    if !crate::io::read::exists(&dir.join("finetuned.json")) && crate::io::read::exists(&config) {
        return transformers_task(
            &crate::interop::read_hf_config(&config)?.task_fields,
            &config,
        );
    }
    Ok(read_model_info::<Info>(dir)?.task)
}

/// The task of a transformers folder: the `finetuning_task` of its `config.json` at `path`
/// (`fields`, its task keys; trueneg's export and run_glue write it).
pub(crate) fn transformers_task(
    fields: &serde_json::Map<String, serde_json::Value>,
    path: &Path,
) -> Result<Task> {
    let name = fields.get("finetuning_task").and_then(|v| v.as_str()).ok_or_else(|| {
        Error::Input(format!(
            "{}: no `finetuning_task`, so the task is unknown: add \"finetuning_task\": \"<task>\" (rte, sst2, …, as run_glue writes it)",
            path.display()
        ))
    })?;
    Task::parse(name).ok_or_else(|| {
        Error::Input(format!(
            "{}: `finetuning_task` {name:?} is none of the tasks trueneg reads",
            path.display()
        ))
    })
}
