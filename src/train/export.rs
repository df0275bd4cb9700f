//! `export`: a run's checkpoint → transformers directories that `from_pretrained` loads:
//! BERT → `BertForMaskedLM`; ELECTRA → `discriminator/` (`ElectraForPreTraining`) and
//! `generator/` (`ElectraForMaskedLM`), each with `config.json`, `model.safetensors` and
//! `tokenizer.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checkpoint;
use super::config::{ModelKind, PretrainConfig};
use crate::interop::hf_config::{HfConfig, write_hf_config};
use crate::interop::tensors::{HostTensor, write_safetensors};
use crate::model::electra::GENERATOR_PREFIX;
use crate::{Error, Result};

/// Exports checkpoint `step` (the latest when `None`) of `run` to `out`; returns the folders
/// written. Refuses to write into a folder that already has a `config.json`.
pub fn export_run(run: &Path, step: Option<u64>, out: &Path) -> Result<Vec<PathBuf>> {
    let cfg = PretrainConfig::of_run(run)?;
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
    let mut ck = checkpoint::load(&dir)?;
    // CLINE's detection head, pooler and loss weights have no place in transformers' classes.
    ck.model
        .retain(|k, _| !k.starts_with(crate::model::heads::CLINE_PREFIX));
    let vocab = ck
        .model
        .get("electra.embeddings.word_embeddings.weight")
        .or_else(|| ck.model.get("bert.embeddings.word_embeddings.weight"))
        .map(|t| t.shape[0])
        .ok_or_else(|| Error::Checkpoint(format!("{}: no word embeddings", dir.display())))?;
    let tokenizer = run.join("tokenizer.json");
    let write =
        |sub: &Path, tensors: &BTreeMap<String, HostTensor>, hf: HfConfig| -> Result<PathBuf> {
            if sub.join("config.json").exists() {
                return Err(Error::Config(format!(
                    "{}: already holds a model; choose another --out",
                    sub.display()
                )));
            }
            std::fs::create_dir_all(sub).map_err(|e| Error::io(sub, e))?;
            let meta = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
            write_safetensors(&sub.join("model.safetensors"), tensors, Some(meta))?;
            write_hf_config(&sub.join("config.json"), &hf)?;
            if tokenizer.exists() {
                let bytes = crate::error::read(&tokenizer)?;
                crate::error::write_atomic(&sub.join("tokenizer.json"), &bytes)?;
            }
            Ok(sub.to_path_buf())
        };
    match cfg.model.kind {
        ModelKind::Bert => {
            let hf = HfConfig {
                model_type: "bert".into(),
                architectures: vec!["BertForMaskedLM".into()],
                encoder: cfg.model.encoder(vocab),
            };
            Ok(vec![write(out, &ck.model, hf)?])
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
            };
            let g = HfConfig {
                model_type: "electra".into(),
                architectures: vec!["ElectraForMaskedLM".into()],
                encoder: cfg.model.generator(vocab),
            };
            Ok(vec![
                write(&out.join("discriminator"), &disc, d)?,
                write(&out.join("generator"), &generator, g)?,
            ])
        }
    }
}
