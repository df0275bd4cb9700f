//! The model being pre-trained: BERT masked-LM or ELECTRA, behind one walkable type.

use burn::prelude::*;

use super::config::{ModelKind, PretrainConfig};
use crate::interop::tensors::{Loader, TensorMap};
use crate::interop::{read_hf_config, read_safetensors};
use crate::model::params::ParamWalker;
use crate::model::{BertMlm, Electra, EncoderConfig};
use crate::{Error, Result};

#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one value per run, never moved in a hot loop
pub enum PretrainModel {
    Bert(BertMlm),
    Electra(Electra),
}

impl PretrainModel {
    pub fn new(cfg: &PretrainConfig, vocab: usize, device: &Device) -> Self {
        let p = cfg.train.precision;
        let encoder = cfg.model.encoder(vocab).with_precision(p);
        match cfg.model.kind {
            ModelKind::Bert => PretrainModel::Bert(BertMlm::new(&encoder, device)),
            ModelKind::Electra => PretrainModel::Electra(Electra::new(
                &encoder,
                &cfg.model.generator(vocab).with_precision(p),
                device,
            )),
        }
    }

    pub fn walk(&mut self, w: &mut dyn ParamWalker) {
        match self {
            PretrainModel::Bert(m) => m.walk(w),
            PretrainModel::Electra(m) => m.walk(w),
        }
    }

    /// Sets every parameter from `map` (names as [`PretrainModel::walk`] gives them).
    pub fn load(&mut self, map: &TensorMap, device: &Device) -> Result<()> {
        let mut loader = Loader::new(map, device);
        self.walk(&mut loader);
        let used = loader.finish()?;
        if let Some(extra) = map.tensors.keys().find(|k| {
            !used.contains(*k)
                && !k.ends_with("position_ids")
                && !k.contains("decoder.weight")
                && !k.contains("generator_lm_head.weight")
        }) {
            return Err(Error::Checkpoint(format!(
                "{}: tensor `{extra}` does not belong to this model",
                map.source.display()
            )));
        }
        Ok(())
    }

    pub fn export(
        &mut self,
    ) -> std::collections::BTreeMap<String, crate::interop::tensors::HostTensor> {
        let mut ex = crate::interop::Exporter::default();
        self.walk(&mut ex);
        ex.tensors
    }
}

/// Reads transformers weights for `init_from`: a BERT directory, or an ELECTRA directory
/// with `discriminator/` and `generator/`. Checks the configs against the run's encoder.
pub fn read_transformers_weights(
    dir: &std::path::Path,
    kind: ModelKind,
    expect: &EncoderConfig,
) -> Result<TensorMap> {
    let check = |sub: &std::path::Path, hidden_ok: bool| -> Result<TensorMap> {
        let cfg = read_hf_config(&sub.join("config.json"))?;
        if cfg.encoder.vocab_size != expect.vocab_size {
            return Err(Error::Checkpoint(format!(
                "{}: field `vocab_size` is {}, the run's tokenizer has {}",
                sub.join("config.json").display(),
                cfg.encoder.vocab_size,
                expect.vocab_size
            )));
        }
        if hidden_ok && cfg.encoder.hidden_size != expect.hidden_size {
            return Err(Error::Checkpoint(format!(
                "{}: field `hidden_size` is {}, the config says {}",
                sub.join("config.json").display(),
                cfg.encoder.hidden_size,
                expect.hidden_size
            )));
        }
        read_safetensors(&sub.join("model.safetensors"))
    };
    match kind {
        ModelKind::Bert => check(dir, true),
        ModelKind::Electra => {
            let mut disc = check(&dir.join("discriminator"), true)?;
            let generator = check(&dir.join("generator"), false)?;
            for (k, v) in generator.tensors {
                if !k.starts_with("electra.embeddings.") {
                    disc.tensors
                        .insert(format!("{}{k}", crate::model::electra::GENERATOR_PREFIX), v);
                }
            }
            Ok(disc)
        }
    }
}
