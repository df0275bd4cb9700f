//! SQuAD v1.1 span extraction: question + context windows → start / end logits per token
//! (a `qa_outputs` linear layer over every hidden state, as transformers'
//! `ElectraForQuestionAnswering`), trained with the mean of the start and end cross-entropies.
//!
//! Features follow the original BERT / ELECTRA SQuAD code: the question is cut to 64 tokens;
//! the context is cut into windows of at most `max_len − |question| − 3` tokens whose starts are
//! `doc_stride` tokens apart (the last window ends at the context's end); `[CLS] question [SEP]
//! window [SEP]`, segment ids 0 / 1. A training window that does not hold the whole answer
//! points at `[CLS]` (start = end = 0).
//!
//! Prediction follows transformers' `postprocess_qa_predictions` with BERT's max-context rule:
//! per window the `n_best` highest start and end logits over all its positions; a pair counts
//! when both are context tokens, the start token is in its max-context window (of the windows
//! holding a token, the one where min(tokens left, tokens right) + 0.01 · window length is
//! largest), start ≤ end and the span has at most `max_answer_len` tokens; its score is start +
//! end logit. The best pair over all windows of a question is the answer, cut from the context
//! between the start token's first and the end token's last character: sub-word precision, as
//! BERT's `get_final_text` gives ("1990" from the "1990s" of "199 ##0 ##s" when the span ends
//! on "##0").

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
use crate::finetune::pretrained::PretrainedEncoder;
use crate::finetune::recipe::{FinetuneOptions, progress_bar};
use crate::finetune::train_loop::{Epochs, Trainable, Tuned, Watch, train_epochs};
use crate::interop::tensors::Loader;
use crate::model::encoder::{Embeddings, Encoder};
use crate::model::params::{ParamWalker, walk_linear};
use crate::model::{EncoderConfig, Inputs};
use crate::tasks::squad::SquadExample;
use crate::tasks::task::Task;
use crate::text::WordPieceTokenizer;
use crate::{Error, Result};

/// Feature and decoding settings (the BERT / ELECTRA defaults).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QaOptions {
    pub max_seq_len: usize,
    pub doc_stride: usize,
    pub max_query_len: usize,
    pub n_best: usize,
    pub max_answer_len: usize,
}

impl Default for QaOptions {
    fn default() -> Self {
        Self {
            max_seq_len: 384,
            doc_stride: 128,
            max_query_len: 64,
            n_best: 20,
            max_answer_len: 30,
        }
    }
}

/// One window of one question.
#[derive(Clone, Debug, PartialEq)]
pub struct QaFeature {
    /// Index of the question in the example list.
    pub example: usize,
    pub ids: Vec<u32>,
    pub types: Vec<u32>,
    /// Byte range in the context of each context token; `None` for the question and specials.
    pub spans: Vec<Option<(usize, usize)>>,
    /// Per position: a context token whose max-context window this is.
    pub max_context: Vec<bool>,
    /// Training target (token positions); (0, 0) when the answer is not inside the window.
    pub start: usize,
    pub end: usize,
}

fn char_to_byte(s: &str, c: usize) -> usize {
    s.char_indices().nth(c).map(|(b, _)| b).unwrap_or(s.len())
}

/// Cuts every example into windows (see the module doc). The first gold answer is the
/// training target.
pub fn make_features(
    tok: &WordPieceTokenizer,
    examples: &[SquadExample],
    o: &QaOptions,
) -> Result<Vec<QaFeature>> {
    let mut out = Vec::new();
    for (ei, e) in examples.iter().enumerate() {
        let mut q = tok.encode(&e.question);
        q.truncate(o.max_query_len);
        let enc = tok
            .inner
            .encode(e.context.as_str(), false)
            .map_err(|err| Error::Input(format!("question {}: {err}", e.id)))?;
        let ctx_ids = enc.get_ids();
        let ctx_spans = enc.get_offsets();
        let room = o.max_seq_len.saturating_sub(q.len() + 3);
        if room == 0 {
            return Err(Error::Config(format!(
                "max_seq_len {} leaves no room for the context after a {}-token question",
                o.max_seq_len,
                q.len()
            )));
        }
        // The answer's token range in the whole context.
        let answer = e.answers.first().map(|(text, start)| {
            let a = char_to_byte(&e.context, *start);
            let b = a + text.len();
            let s = ctx_spans.iter().position(|&(_, end)| end > a);
            let t = ctx_spans.iter().rposition(|&(st, _)| st < b);
            (s, t)
        });
        let windows = windows(ctx_ids.len(), room, o.doc_stride);
        for (wi, &(w0, len)) in windows.iter().enumerate() {
            let s = tok.special;
            let mut ids = vec![s.cls];
            ids.extend(&q);
            ids.push(s.sep);
            let offset = ids.len();
            let mut types = vec![0; offset];
            let mut spans = vec![None; offset];
            let mut max_context = vec![false; offset];
            ids.extend(&ctx_ids[w0..w0 + len]);
            spans.extend(ctx_spans[w0..w0 + len].iter().map(|&p| Some(p)));
            max_context.extend((w0..w0 + len).map(|t| max_context_window(&windows, t) == wi));
            ids.push(s.sep);
            spans.push(None);
            max_context.push(false);
            types.resize(ids.len(), 1);
            let (start, end) = match answer {
                Some((Some(a), Some(b))) if a >= w0 && b < w0 + len && a <= b => {
                    (a - w0 + offset, b - w0 + offset)
                }
                _ => (0, 0),
            };
            out.push(QaFeature {
                example: ei,
                ids,
                types,
                spans,
                max_context,
                start,
                end,
            });
        }
    }
    Ok(out)
}

/// The context windows (first token, length) of a context of `n` tokens: at most `room`
/// tokens each, starts `stride` apart, the last ending at the context's end.
fn windows(n: usize, room: usize, stride: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut w0 = 0;
    loop {
        let len = room.min(n - w0);
        out.push((w0, len));
        if w0 + len >= n {
            return out;
        }
        w0 += len.min(stride);
    }
}

/// BERT's max-context window of context token `t`: of the windows holding it, the one where
/// min(tokens left of it, tokens right of it) + 0.01 · window length is largest (the first on
/// ties).
fn max_context_window(windows: &[(usize, usize)], t: usize) -> usize {
    let mut best: Option<(f64, usize)> = None;
    for (i, &(w0, len)) in windows.iter().enumerate() {
        if t < w0 || t >= w0 + len {
            continue;
        }
        let score = (t - w0).min(w0 + len - 1 - t) as f64 + 0.01 * len as f64;
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, i));
        }
    }
    best.map_or(usize::MAX, |(_, i)| i)
}

/// Encoder + `qa_outputs` (hidden → 2: start, end).
#[derive(Module, Debug)]
pub struct SpanExtractor {
    pub embeddings: Embeddings,
    pub encoder: Encoder,
    pub head: Linear,
}

impl SpanExtractor {
    pub fn new(c: &EncoderConfig, device: &Device) -> Self {
        Self {
            embeddings: Embeddings::new(c, device).with_frozen_pad(c.pad_token_id),
            encoder: Encoder::new(c, device),
            head: crate::model::encoder::linear(c.hidden_size, 2, device),
        }
    }

    /// Start and end logits, each [batch, len], at every position (padding included, as
    /// transformers' `ElectraForQuestionAnswering` gives them; decoding only reads context
    /// tokens).
    pub fn forward(&self, x: &Inputs) -> (Tensor<2>, Tensor<2>) {
        let e = self
            .embeddings
            .forward(x.ids.clone(), x.token_types.clone());
        let h = self.encoder.forward(e, x.attention_mask.clone());
        let [b, l, _] = h.dims();
        let logits = self.head.forward(h);
        let start = logits.clone().slice([0..b, 0..l, 0..1]).reshape([b, l]);
        let end = logits.slice([0..b, 0..l, 1..2]).reshape([b, l]);
        (start, end)
    }

    pub fn walk_encoder(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        self.embeddings.walk(&format!("{prefix}.embeddings"), w);
        self.encoder.walk(prefix, w);
    }
}

impl Trainable for SpanExtractor {
    fn walk(&mut self, prefix: &str, w: &mut dyn ParamWalker) {
        self.walk_encoder(prefix, w);
        walk_linear(w, "qa_outputs", &mut self.head);
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
    let mut model = SpanExtractor::new(&pre.config, &device);
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
        let (start, end) = model.forward(&batch(&fs, pad, &device));
        let gold =
            |f: &dyn Fn(&QaFeature) -> usize| -> Vec<usize> { fs.iter().map(|x| f(x)).collect() };
        span_loss(start, end, &gold(&|f| f.start), &gold(&|f| f.end))
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

/// The best answer of one window: (score, byte start, byte end) in the context (see the
/// module documentation for the rules).
pub fn best_span(
    f: &QaFeature,
    start: &[f32],
    end: &[f32],
    n_best: usize,
    max_answer_len: usize,
) -> Option<(f32, usize, usize)> {
    let top = |logits: &[f32]| {
        let mut idx: Vec<usize> = (0..f.ids.len()).collect();
        idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        idx.truncate(n_best);
        idx
    };
    let mut best: Option<(f32, usize, usize)> = None;
    for &s in &top(start) {
        if !f.max_context.get(s).copied().unwrap_or(false) {
            continue;
        }
        for &e in &top(end) {
            let (Some(a), Some(z)) = (f.spans[s], f.spans[e]) else {
                continue;
            };
            if e < s || e - s + 1 > max_answer_len {
                continue;
            }
            let score = start[s] + end[e];
            if best.is_none_or(|b| score > b.0) {
                best = Some((score, a.0, z.1));
            }
        }
    }
    best
}

/// Answers (id → text) for `examples`, with questions/s.
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
        let (s, e) = m.model.forward(&batch(&fs, tok.special.pad, device));
        let len = s.dims()[1];
        let host = |t: Tensor<2>| {
            t.into_data()
                .convert::<f32>()
                .try_into_vec::<f32>()
                .expect("f32")
        };
        let (s, e) = (host(s), host(e));
        for (k, f) in chunk.iter().enumerate() {
            let row = k * len..k * len + f.ids.len();
            let cand = best_span(
                f,
                &s[row.clone()],
                &e[row],
                m.options.n_best,
                m.options.max_answer_len,
            );
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
        .map(|(e, b)| {
            let text = b.map(|(_, a, z)| e.context[a..z].to_string());
            (e.id.clone(), text.unwrap_or_default())
        })
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
    pub prefix: String,
    pub config: EncoderConfig,
    pub options: QaOptions,
}

pub fn save_qa(m: &mut QaModel, tok: &WordPieceTokenizer, dir: &Path) -> Result<()> {
    let info = QaInfo {
        task: Task::Squad,
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
    let mut model = SpanExtractor::new(&info.config.clone().without_dropout(), device);
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
    Ok(read_model_info::<Info>(dir)?.task)
}
