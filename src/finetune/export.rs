//! `export --model <fine-tuned seed folder>`: a model fine-tuned by trueneg as a transformers
//! folder. GLUE → `ElectraForSequenceClassification` / `BertForSequenceClassification` with
//! `id2label` / `label2id` (STS-B: one output, `problem_type = "regression"`, in the task's 0–5
//! units); SQuAD with transformers' head → `ElectraForQuestionAnswering` /
//! `BertForQuestionAnswering` (ELECTRA's joint SQuAD head has no transformers class and is
//! refused). With the tokenizer's Hub files and a model card.

use crate::io::PathQuery;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::classifier_folder::FineTunedInfo;
use super::classify::ClsHead;
use super::folder::read_model_info;
use super::scores::Scores;
use super::seeds::TaskResult;
use super::span::{QaInfo, SpanHeadKind, finetuned_task};
use crate::interop::HfConfig;
use crate::interop::hf_config::{INPUT_LENGTH, TRUNCATION};
use crate::interop::hub::{Provenance, check_folders, write_folder};
use crate::interop::tensors::{HostTensor, read_safetensors};
use crate::io::outputs::Outputs;
use crate::model::EncoderConfig;
use crate::tasks::glue::GlueTask;
use crate::tasks::task::Task;
use crate::{Error, Result};

/// Exports the fine-tuned model folder `model` (a `seed-N` folder of `finetune`) to `out`;
/// returns the folder written. An earlier export in `out` is refused unless forced.
pub fn export_finetuned(model: &Path, out: &Path, outputs: &Outputs) -> Result<PathBuf> {
    let tokenizer = model.join("tokenizer.json");
    check_folders(out, &[out.to_path_buf()], tokenizer.is_present(), outputs)?;
    let task = finetuned_task(model)?;
    // The file shipped must be the one the model was fine-tuned with.
    let fingerprint = match tokenizer.is_present() {
        true => super::folder::model_tokenizer(model)?.fingerprint(),
        false => String::new(),
    };
    let weights_file = model.join("model.safetensors");
    let mut weights = read_safetensors(&weights_file)?.tensors;
    let mut written_as_two_layers = false;
    let (prefix, encoder, fields) = match task {
        Task::Classification(t) => {
            let info: FineTunedInfo = read_model_info(model)?;
            written_as_two_layers = info.head == ClsHead::Linear;
            if info.regression_scale != 1.0 {
                // The head's last layer × scale: transformers' output is the prediction itself.
                scale_output(
                    &mut weights,
                    info.head,
                    info.regression_scale,
                    &weights_file,
                )?;
            }
            if info.head == ClsHead::Linear {
                super::linear_head::as_transformers_head(
                    &mut weights,
                    &info.prefix,
                    info.config.num_hidden_layers,
                    info.config.hidden_size,
                    &weights_file,
                )?;
            }
            let mut fields = labels(t);
            // How trueneg read the examples: `evaluate` of the export reads them the same way.
            fields.insert(INPUT_LENGTH.into(), json!(info.max_seq_len));
            fields.insert(TRUNCATION.into(), json!(info.truncation));
            (info.prefix, info.config, fields)
        }
        Task::Squad => {
            let info: QaInfo = read_model_info(model)?;
            if info.head == SpanHeadKind::ElectraJoint {
                return Err(Error::Input(format!(
                    "{}: this SQuAD model has ELECTRA's joint start-to-end head (the ELECTRA recipe's), which transformers has no class for; fine-tune with --head transformers to export one",
                    model.display()
                )));
            }
            (info.prefix, info.config, Map::new())
        }
    };
    let head = match task {
        Task::Classification(_) => "SequenceClassification",
        Task::Squad => "QuestionAnswering",
    };
    let class = if prefix == "bert" { "Bert" } else { "Electra" };
    let hf = HfConfig {
        model_type: prefix,
        architectures: vec![format!("{class}For{head}")],
        encoder,
        task_fields: fields,
    };
    let mut card = model_card(model, task, &hf);
    if written_as_two_layers {
        card += LINEAR_HEAD_LIMITS;
    }
    let tokenizer = tokenizer.is_present().then_some(tokenizer.as_path());
    let provenance = Provenance {
        tokenizer: fingerprint,
        source: format!(
            "the fine-tuned model {}",
            std::path::absolute(model)
                .unwrap_or_else(|_| model.to_path_buf())
                .display()
        ),
    };
    write_folder(out, &weights, &hf, tokenizer, &card, &provenance, outputs)
}

/// The names an exported model gives `task`'s classes, in the task's order: GLUE's own where
/// its files use them, readable names where they use 0 / 1 (the Hub's GLUE names).
pub fn hub_label_names(task: GlueTask) -> Vec<&'static str> {
    task.spec().hub_label_names().to_vec()
}

/// The label names of `task` ([`hub_label_names`]) as `id2label`, `label2id` and
/// `problem_type`, with `finetuning_task`.
fn labels(task: GlueTask) -> Map<String, Value> {
    let mut m = Map::new();
    // transformers' own field for the task a model was fine-tuned on (run_glue writes it):
    // `evaluate` reads the task from it.
    m.insert("finetuning_task".into(), json!(task.name()));
    if task.is_regression() {
        m.insert("num_labels".into(), json!(1));
        m.insert("problem_type".into(), json!("regression"));
        m.insert("id2label".into(), json!({"0": "score"}));
        m.insert("label2id".into(), json!({"score": 0}));
        return m;
    }
    let names = hub_label_names(task);
    let id2label: Map<String, Value> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (i.to_string(), json!(n)))
        .collect();
    let label2id: Map<String, Value> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.to_string(), json!(i)))
        .collect();
    m.insert("num_labels".into(), json!(names.len()));
    m.insert("problem_type".into(), json!("single_label_classification"));
    m.insert("id2label".into(), Value::Object(id2label));
    m.insert("label2id".into(), Value::Object(label2id));
    m
}

/// Multiplies the output layer of `head` (weight and bias) by `scale`.
fn scale_output(
    weights: &mut BTreeMap<String, HostTensor>,
    head: ClsHead,
    scale: f64,
    file: &Path,
) -> Result<()> {
    let layer = match head {
        ClsHead::ElectraTransformers => "classifier.out_proj",
        ClsHead::Linear | ClsHead::BertPooler => "classifier",
    };
    for part in ["weight", "bias"] {
        let name = format!("{layer}.{part}");
        let t = weights
            .get_mut(&name)
            .ok_or_else(|| Error::Checkpoint(format!("{}: no tensor `{name}`", file.display())))?;
        t.values.iter_mut().for_each(|v| *v *= scale as f32);
    }
    Ok(())
}

/// The model card's section on ELECTRA's one-layer head written as transformers' two.
const LINEAR_HEAD_LIMITS: &str = "\n## Limits of this head\n\n\
The model was fine-tuned with ELECTRA's one-layer head (dropout, one dense layer on [CLS]), \
written here as transformers' `ElectraClassificationHead`: `dense` is the identity plus a \
shift that keeps GELU's inputs where GELU is the identity, and `out_proj` is the trained \
layer. That is exact in float32 inference only:\n\n\
- in bfloat16 (or float16) the shifted activations, tens in size, lose their low bits: the \
logits move by tenths to whole units;\n\
- in train mode the head's second dropout falls on the shifted activations and swamps the \
logits, so training this folder further in transformers starts from noise.\n\n\
For half-precision inference or further training in transformers, fine-tune with \
`trueneg finetune --head transformers`, whose head is transformers' own.\n";

/// The `README.md` of an exported fine-tuned model: the task, the architecture, where the
/// encoder came from, the recipe and the dev scores (from `results.json` beside the seed
/// folder, when there).
fn model_card(model: &Path, task: Task, hf: &HfConfig) -> String {
    let e: &EncoderConfig = &hf.encoder;
    let results: Option<TaskResult> = model
        .parent()
        .map(|p| p.join("results.json"))
        .and_then(|p| crate::io::read_json(&p).ok());
    let seed = model
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("seed-"))
        .and_then(|s| s.parse::<u64>().ok());
    let seed_scores = results.as_ref().and_then(|r| {
        let at = seed.and_then(|s| r.seeds.iter().position(|x| *x == s))?;
        r.per_seed.get(at)
    });
    let settings: Option<serde_json::Value> = model
        .parent()
        .map(|p| p.join(super::out_folder::SETTINGS))
        .and_then(|p| crate::io::read_json(&p).ok());
    let mut facts = Vec::new();
    if let Some(r) = &results {
        if let Some(p) = &r.model {
            let step = p
                .checkpoint_step
                .map(|s| format!(" (checkpoint step {s})"))
                .unwrap_or_default();
            facts.push(format!("- Encoder: `{}`{step}.", last_name(&p.model)));
            facts.push(format!(
                "- Pre-training: {}.",
                p.pretraining
                    .as_deref()
                    .unwrap_or("not recorded (a folder of another maker)")
            ));
        }
        if let Some(sha) = settings
            .as_ref()
            .and_then(|s| s[super::out_folder::WEIGHTS].as_str())
        {
            facts.push(format!("- Pre-trained weights: SHA-256 `{sha}`."));
        }
        if let Some(o) = &r.options {
            facts.push(format!(
                "- Recipe: `{}`, lr {}, {} epochs, batch {}, {} tokens, layer-wise decay {}.",
                o.recipe.name(),
                o.lr,
                o.epochs,
                o.batch_size,
                o.max_seq_len,
                o.layer_decay
            ));
        }
        if let Some(scores) = seed_scores {
            facts.push(format!(
                "- Dev scores (seed {}): {}.",
                seed.unwrap_or(0),
                scores.line()
            ));
            for why in scores.warnings() {
                facts.push(format!("- **Warning:** this model {why}."));
            }
        }
        if let Some(d) = r.degenerate_seeds().filter(|_| r.seeds.len() > 1) {
            facts.push(format!("- Of the run's seeds, {d}."));
        }
    }
    if facts.is_empty() {
        facts.push("- No `results.json` was found beside the fine-tuned folder.".into());
    }
    let (pipeline, auto) = match task {
        Task::Classification(_) => ("text-classification", "AutoModelForSequenceClassification"),
        Task::Squad => ("question-answering", "AutoModelForQuestionAnswering"),
    };
    format!(
        "---\nlibrary_name: transformers\npipeline_tag: {pipeline}\nlicense: other\ntags:\n- trueneg\n- {kind}\n{front}---\n\n\
# {name} fine-tuned on {task}\n\n\
Fine-tuned with trueneg {version} from `{model}`.\n\n\
## Architecture\n\n\
`{arch}`: {layers} layers, hidden size {hidden}, {heads} attention heads, vocabulary {vocab}, \
{positions} positions.\n\n\
## Fine-tuning\n\n{facts}\n\n\
## Use\n\n```python\nfrom transformers import pipeline\n\
p = pipeline(\"{pipeline}\", model=\"path/to/this/folder\")  # or {auto}\n```\n\n\
## License\n\nSet `license` above to the terms of the pre-training and fine-tuning data.\n",
        kind = hf.model_type,
        name = hf.model_type.to_uppercase(),
        task = task.display_name(),
        version = crate::VERSION,
        front = front_matter(
            &format!(
                "trueneg-{}-{}",
                hf.model_type,
                task.display_name().to_lowercase()
            ),
            task,
            pipeline,
            seed_scores
        ),
        model = model
            .parent()
            .map(|p| format!("{}/{}", last_name(p), last_name(model)))
            .unwrap_or_else(|| last_name(model)),
        arch = hf.architectures.join(", "),
        layers = e.num_hidden_layers,
        hidden = e.hidden_size,
        heads = e.num_attention_heads,
        vocab = e.vocab_size,
        positions = e.max_position_embeddings,
        facts = facts.join("\n"),
    )
}

/// The last component of `path` (a card names folders, never where they were on this machine).
fn last_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The Hub dataset of `task` and its configuration, where it has one.
fn hub_dataset(task: Task) -> Option<(&'static str, &'static str)> {
    match task {
        Task::Squad => Some(("rajpurkar/squad", "plain_text")),
        Task::Classification(t) => t.spec().hub_dataset(),
    }
}

/// A metric's type in the Hub's model-index (the `evaluate` library's names).
fn metric_type(name: &str) -> &str {
    match name {
        "mcc" => "matthews_correlation",
        "spearman" => "spearmanr",
        "pearson" => "pearsonr",
        "em" => "exact_match",
        other => other,
    }
}

/// The card's `datasets` and `model-index` (the seed's dev scores) in YAML, when known.
fn front_matter(name: &str, task: Task, pipeline: &str, scores: Option<&Scores>) -> String {
    let Some((dataset, config)) = hub_dataset(task) else {
        return String::new();
    };
    let mut y = format!("datasets:\n- {dataset}\n");
    let Some(scores) = scores else {
        return y;
    };
    y += &format!(
        "model-index:\n- name: {name}\n  results:\n  - task:\n      type: {pipeline}\n    dataset:\n      type: {dataset}\n      name: {}\n      config: {config}\n      split: validation\n    metrics:\n",
        task.display_name()
    );
    for (k, v) in scores.metrics.iter().filter(|(k, _)| !k.contains('/')) {
        y += &format!(
            "    - type: {}\n      value: {v:.2}\n      name: dev {k}\n",
            metric_type(k)
        );
    }
    y
}
