//! `export`: a run's checkpoint → transformers directories that `from_pretrained` loads:
//! BERT → `BertForMaskedLM`; ELECTRA → `discriminator/` (`ElectraForPreTraining`) and
//! `generator/` (`ElectraForMaskedLM`), each with `config.json`, `model.safetensors`, a
//! `README.md` model card and the tokenizer's Hub files (`tokenizer.json`,
//! `tokenizer_config.json`, `special_tokens_map.json`, `vocab.txt`).

use crate::io::PathQuery;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checkpoint;
use super::config::{ModelKind, PretrainConfig};
use crate::interop::hf_config::HfConfig;
use crate::interop::hub::{Provenance, check_folders, write_folder};
use crate::interop::tensors::HostTensor;
use crate::io::outputs::Outputs;
use crate::model::electra::GENERATOR_PREFIX;
use crate::{Error, Result};

/// Exports checkpoint `step` (the latest when `None`) of `run` to `out`; returns the folders
/// written. A whole earlier export there is refused (unless forced); files of a half-finished
/// one are replaced when `outputs` allows it (this command wrote them, or `--force`), all
/// checked before anything is written. `config.json` is written last, so a folder with one
/// holds a whole model, and a half-finished export is completed by running it again.
pub fn export_run(
    run: &Path,
    step: Option<u64>,
    out: &Path,
    outputs: &Outputs,
) -> Result<Vec<PathBuf>> {
    let cfg = PretrainConfig::of_run(run)?;
    let subs = match cfg.model.kind {
        ModelKind::Bert => vec![out.to_path_buf()],
        ModelKind::Electra => vec![out.join("discriminator"), out.join("generator")],
    };
    let tokenizer = run.join("tokenizer.json");
    check_folders(out, &subs, tokenizer.is_present(), outputs)?;
    // The file shipped must be the one the weights were trained with.
    let fingerprint = match tokenizer.is_present() {
        true => super::run::run_tokenizer(run)?.fingerprint(),
        false => String::new(),
    };
    let mut ck = load_checkpoint(run, step)?;
    // A step's own heads (detection, pooler, loss weights) have no place in transformers'
    // classes.
    let kind = super::steps::kind_of(cfg.objective.kind);
    ck.model.retain(|k, _| !kind.is_head_tensor(k));
    let vocab = ck
        .model
        .get("electra.embeddings.word_embeddings.weight")
        .or_else(|| ck.model.get("bert.embeddings.word_embeddings.weight"))
        .map(|t| t.shape[0])
        .ok_or_else(|| Error::Checkpoint(format!("{}: no word embeddings", run.display())))?;
    super::run::check_weights(
        &cfg,
        vocab,
        &ck.model,
        &run.join(format!("checkpoints (step {})", ck.state.step)),
        run,
    )?;
    let step = ck.state.step;
    let tokenizer = tokenizer.is_present().then_some(tokenizer.as_path());
    let write = |sub: &Path,
                 tensors: &BTreeMap<String, HostTensor>,
                 hf: HfConfig,
                 role: &str|
     -> Result<PathBuf> {
        let card = super::model_card::model_card(run, &cfg, step, &hf, role);
        let provenance = Provenance {
            tokenizer: fingerprint.clone(),
            source: format!(
                "{} of the run {}, step {step}, objective `{}`",
                role,
                std::path::absolute(run)
                    .unwrap_or_else(|_| run.to_path_buf())
                    .display(),
                cfg.objective.kind.name()
            ),
        };
        write_folder(sub, tensors, &hf, tokenizer, &card, &provenance, outputs)
    };
    match cfg.model.kind {
        ModelKind::Bert => {
            let hf = HfConfig {
                model_type: "bert".into(),
                architectures: vec!["BertForMaskedLM".into()],
                encoder: cfg.model.encoder(vocab),
                task_fields: Default::default(),
            };
            Ok(vec![write(&subs[0], &ck.model, hf, "model")?])
        }
        ModelKind::Electra => {
            let (mut disc, mut generator) = (BTreeMap::new(), BTreeMap::new());
            for (k, v) in ck.model {
                if let Some(rest) = k.strip_prefix(GENERATOR_PREFIX) {
                    generator.insert(rest.to_string(), v);
                } else {
                    if k.starts_with("electra.embeddings.") {
                        generator.insert(k.clone(), v.clone());
                    }
                    disc.insert(k, v);
                }
            }
            let d = HfConfig {
                model_type: "electra".into(),
                architectures: vec!["ElectraForPreTraining".into()],
                encoder: cfg.model.encoder(vocab),
                task_fields: Default::default(),
            };
            let g = HfConfig {
                model_type: "electra".into(),
                architectures: vec!["ElectraForMaskedLM".into()],
                encoder: cfg.model.generator(vocab),
                task_fields: Default::default(),
            };
            Ok(vec![
                write(&subs[0], &disc, d, "discriminator")?,
                write(&subs[1], &generator, g, "generator")?,
            ])
        }
    }
}

/// The checkpoint at `step` (the latest when `None`), read whole into memory. A checkpoint
/// removed by the run's rotation while it was read (a run still training) is looked up again:
/// the latest one then, or an error naming the step that is gone.
pub fn load_checkpoint(run: &Path, step: Option<u64>) -> Result<checkpoint::Checkpoint> {
    for _attempt in 0..5 {
        let all = checkpoint::list(run);
        let dir = match step {
            None => all.last().map(|(_, d)| d.clone()),
            Some(s) => all.iter().find(|(k, _)| *k == s).map(|(_, d)| d.clone()),
        }
        .ok_or_else(|| {
            Error::Checkpoint(format!(
                "{}: no checkpoint{}",
                run.display(),
                step.map(|s| format!(" at step {s}")).unwrap_or_default()
            ))
        })?;
        match checkpoint::load(&dir) {
            Err(_) if !dir.is_present() => continue,
            loaded => return loaded,
        }
    }
    Err(Error::Checkpoint(format!(
        "{}: the checkpoints were removed while being read (a run rotating them faster than \
         they can be exported?); try again, or export after the run",
        run.display()
    )))
}
