//! `export`: a run's checkpoint → transformers directories that `from_pretrained` loads:
//! BERT → `BertForMaskedLM`; ELECTRA → `discriminator/` (`ElectraForPreTraining`) and
//! `generator/` (`ElectraForMaskedLM`), each with `config.json`, `model.safetensors`, a
//! `README.md` model card and the tokenizer's Hub files (`tokenizer.json`,
//! `tokenizer_config.json`, `special_tokens_map.json`, `vocab.txt`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::checkpoint;
use super::config::{ModelKind, PretrainConfig};
use crate::interop::hf_config::{HfConfig, write_hf_config};
use crate::interop::hub::tokenizer_files as tokenizer_files_of;
use crate::interop::tensors::{HostTensor, write_safetensors};
use crate::model::electra::GENERATOR_PREFIX;
use crate::output::Outputs;
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
    let files = export_files(&subs, tokenizer.exists());
    if !outputs.forced() && subs.iter().all(|d| d.join("config.json").exists()) {
        return Err(Error::Config(format!(
            "{}: already holds an exported model; choose another --out, or pass --force to \
             replace it (nothing was changed)",
            out.display()
        )));
    }
    outputs.check(&files)?;
    let mut ck = load_checkpoint(run, step)?;
    // CLINE's detection head, pooler and loss weights have no place in transformers' classes.
    ck.model
        .retain(|k, _| !k.starts_with(crate::model::heads::CLINE_PREFIX));
    let vocab = ck
        .model
        .get("electra.embeddings.word_embeddings.weight")
        .or_else(|| ck.model.get("bert.embeddings.word_embeddings.weight"))
        .map(|t| t.shape[0])
        .ok_or_else(|| Error::Checkpoint(format!("{}: no word embeddings", run.display())))?;
    let step = ck.state.step;
    let write = |sub: &Path,
                 tensors: &BTreeMap<String, HostTensor>,
                 hf: HfConfig,
                 role: &str|
     -> Result<PathBuf> {
        std::fs::create_dir_all(sub).map_err(|e| Error::io(sub, e))?;
        let meta = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
        let weights = sub.join("model.safetensors");
        write_safetensors(&weights, tensors, Some(meta))?;
        outputs.record(&weights)?;
        if tokenizer.exists() {
            write_tokenizer(sub, &tokenizer, &hf, outputs)?;
        }
        let card = super::model_card::model_card(run, &cfg, step, &hf, role);
        outputs.write(&sub.join("README.md"), card.as_bytes())?;
        // config.json last: a folder with it holds a whole model.
        write_hf_config(&sub.join("config.json"), &hf)?;
        outputs.record(&sub.join("config.json"))?;
        Ok(sub.to_path_buf())
    };
    match cfg.model.kind {
        ModelKind::Bert => {
            let hf = HfConfig {
                model_type: "bert".into(),
                architectures: vec!["BertForMaskedLM".into()],
                encoder: cfg.model.encoder(vocab),
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
            };
            let g = HfConfig {
                model_type: "electra".into(),
                architectures: vec!["ElectraForMaskedLM".into()],
                encoder: cfg.model.generator(vocab),
            };
            Ok(vec![
                write(&subs[0], &disc, d, "discriminator")?,
                write(&subs[1], &generator, g, "generator")?,
            ])
        }
    }
}

/// The files an export writes into `subs` (the tokenizer's when the run has one).
fn export_files(subs: &[PathBuf], tokenizer: bool) -> Vec<PathBuf> {
    let tokenizer_files = [
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "vocab.txt",
    ];
    subs.iter()
        .flat_map(|d| {
            ["model.safetensors", "config.json", "README.md"]
                .into_iter()
                .chain(tokenizer_files.into_iter().filter(|_| tokenizer))
                .map(|f| d.join(f))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The run's `tokenizer` and its Hub files (for the model `hf`) into `sub`.
fn write_tokenizer(sub: &Path, tokenizer: &Path, hf: &HfConfig, outputs: &Outputs) -> Result<()> {
    outputs.write(&sub.join("tokenizer.json"), &crate::error::read(tokenizer)?)?;
    let class = if hf.model_type == "electra" {
        "ElectraTokenizer"
    } else {
        "BertTokenizer"
    };
    let positions = hf.encoder.max_position_embeddings;
    for (name, bytes) in tokenizer_files_of(tokenizer, positions, class)? {
        outputs.write(&sub.join(name), &bytes)?;
    }
    Ok(())
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
            Err(_) if !dir.exists() => continue,
            loaded => return loaded,
        }
    }
    Err(Error::Checkpoint(format!(
        "{}: the checkpoints were removed while being read (a run rotating them faster than \
         they can be exported?); try again, or export after the run",
        run.display()
    )))
}
