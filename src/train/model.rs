//! The model being pre-trained: BERT masked-LM or ELECTRA, behind one walkable type.

use crate::io::PathQuery;
use burn::prelude::*;

use super::config::{ModelKind, ModelSection, ModelShape, StepSettings};
use super::step_kind::StepKind;
use crate::interop::tensors::{Loader, TensorMap};
use crate::interop::{read_hf_config, read_safetensors};
use crate::model::params::ParamWalker;
use crate::model::step_heads::StepHeads;
use crate::model::{BertMlm, Electra, EncoderConfig, Inputs};
use crate::{Error, Result};

#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one value per run, never moved in a hot loop
pub enum Net {
    Bert(BertMlm),
    Electra(Electra),
}

impl Net {
    /// The masked-LM model's encoder (BERT's, ELECTRA's generator): inputs → hidden states.
    pub fn mlm_encode(&self, x: &Inputs) -> Tensor<3> {
        match self {
            Net::Bert(b) => b.encode(x),
            Net::Electra(e) => e.generator_encode(x),
        }
    }

    /// The encoder kept after pre-training (BERT's, ELECTRA's discriminator).
    pub fn encode(&self, x: &Inputs) -> Tensor<3> {
        match self {
            Net::Bert(b) => b.encode(x),
            Net::Electra(e) => e.encode(x),
        }
    }
}

/// The network and the parameters its training step adds beside it (`train::steps`).
#[derive(Debug, Clone)]
pub struct PretrainModel {
    pub net: Net,
    pub heads: Option<Box<dyn StepHeads>>,
    /// The name prefix of the heads' tensors ([`StepKind::heads_prefix`]).
    heads_prefix: Option<&'static str>,
}

impl PretrainModel {
    /// The network `shape` describes, with the heads of the training step `step` of a run of
    /// `settings`.
    pub fn of(
        shape: &ModelShape,
        settings: &StepSettings,
        step: &dyn StepKind,
        device: &Device,
    ) -> Self {
        let (m, p, vocab) = (shape.model, shape.precision, shape.vocab);
        let encoder = m.encoder(vocab).with_precision(p);
        let net = match m.kind {
            ModelKind::Bert => Net::Bert(BertMlm::new(&encoder, device)),
            ModelKind::Electra => Net::Electra(Electra::new(
                &encoder,
                &m.generator(vocab).with_precision(p),
                device,
            )),
        };
        let heads = step.heads(settings, &encoder, device);
        Self {
            net,
            heads,
            heads_prefix: step.heads_prefix(),
        }
    }

    /// The same parameters without autodiff: no gradients are kept and dropout is off.
    pub fn valid(&self) -> Self {
        Self {
            net: match &self.net {
                Net::Bert(b) => Net::Bert(b.clone().valid()),
                Net::Electra(e) => Net::Electra(e.clone().valid()),
            },
            heads: self.heads.as_ref().map(|h| h.valid()),
            heads_prefix: self.heads_prefix,
        }
    }

    /// The step's heads as the type `H` it made them (`None`: no heads, or others).
    pub fn heads<H: StepHeads>(&self) -> Option<&H> {
        self.heads.as_ref()?.as_any().downcast_ref()
    }

    /// The token-embedding matrix, [vocab, dim], without gradient (ELECTRA's is shared by
    /// its generator and discriminator).
    pub fn word_matrix(&self) -> Tensor<2> {
        match &self.net {
            Net::Bert(b) => b.embeddings.word_matrix(),
            Net::Electra(e) => e.embeddings.word_matrix(),
        }
        .detach()
    }

    pub fn is_electra(&self) -> bool {
        matches!(self.net, Net::Electra(_))
    }

    /// Whether tensor `name` belongs to its step's heads.
    fn is_head_tensor(&self, name: &str) -> bool {
        super::step_kind::under_prefix(self.heads_prefix, name)
    }

    /// A copy on `device` with an autodiff graph of its own: a data-parallel replica.
    pub fn replica(&self, device: &Device) -> Self {
        let mut r = self.clone();
        r.walk(&mut crate::model::params::MoveTo(device));
        r
    }

    pub fn walk(&mut self, w: &mut dyn ParamWalker) {
        self.walk_net(w);
        if let Some(h) = &mut self.heads {
            h.walk(w);
        }
    }

    fn walk_net(&mut self, w: &mut dyn ParamWalker) {
        match &mut self.net {
            Net::Bert(m) => m.walk(w),
            Net::Electra(m) => m.walk(w),
        }
    }

    /// Sets every parameter from `map` (names as [`PretrainModel::walk`] gives them).
    pub fn load(&mut self, map: &TensorMap, device: &Device) -> Result<()> {
        self.load_from(map, device, true)
    }

    /// Sets the network's parameters from `map` (`model.init_from`): the step's heads keep
    /// their fresh values, and step heads' tensors in `map` are not used.
    pub fn load_init(&mut self, map: &TensorMap, device: &Device) -> Result<()> {
        self.load_from(map, device, false)
    }

    fn load_from(&mut self, map: &TensorMap, device: &Device, heads: bool) -> Result<()> {
        let mut loader = Loader::new(map, device);
        if heads {
            self.walk(&mut loader);
        } else {
            self.walk_net(&mut loader);
        }
        let used = loader.finish()?;
        if let Some(extra) = map.tensors.keys().find(|k| {
            !used.contains(*k)
                && (heads || !self.is_head_tensor(k))
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

/// `init_from`'s tokenizer (its `tokenizer.json` or `vocab.txt`, or its `discriminator/`'s)
/// must map tokens to the ids of `run_tokenizer`: a model trained with another vocabulary of
/// the same size would train on meaningless ids. A folder without a tokenizer is a warning.
pub fn check_init_tokenizer(dir: &std::path::Path, run_tokenizer: &std::path::Path) -> Result<()> {
    let discriminator = dir.join("discriminator");
    let Some(found) = crate::text::tokenizer::tokenizer_in(&[dir, &discriminator]) else {
        tracing::warn!(
            "model.init_from {}: no tokenizer.json or vocab.txt; its ids are taken to be the run's ({})",
            dir.display(),
            run_tokenizer.display()
        );
        return Ok(());
    };
    let theirs = crate::text::WordPieceTokenizer::load(&found)?;
    let ours = crate::text::WordPieceTokenizer::load(run_tokenizer)?;
    let differ = ours.vocab_differences(&theirs);
    if differ > 0 {
        return Err(Error::Config(format!(
            "field `model.init_from`: {} is another tokenizer than the run's {} ({differ} of {} tokens differ); prepare the corpus with it (`prepare --tokenizer {}`)",
            found.display(),
            run_tokenizer.display(),
            ours.vocab_size(),
            found.display()
        )));
    }
    Ok(())
}

/// The discriminator and generator folders of ELECTRA's `init_from`: a folder holding
/// `discriminator/` and `generator/`, or a discriminator's own folder with its generator
/// beside it ([`generator_candidates`](crate::interop::hub_cache::generator_candidates)).
fn electra_pair(dir: &std::path::Path) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    if dir.join("discriminator/config.json").is_present() || !dir.join("config.json").is_present() {
        return Ok((dir.join("discriminator"), dir.join("generator")));
    }
    let candidates = crate::interop::hub_cache::generator_candidates(dir);
    match candidates
        .iter()
        .find(|c| c.join("config.json").is_present())
    {
        Some(g) => Ok((dir.to_path_buf(), g.clone())),
        None => Err(Error::Config(format!(
            "field `model.init_from`: {} is an ELECTRA discriminator alone; its generator was \
             looked for at {}; give the folder holding discriminator/ and generator/",
            dir.display(),
            if candidates.is_empty() {
                "no place (the folder is not named discriminator)".into()
            } else {
                candidates
                    .iter()
                    .map(|c| c.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" and ")
            }
        ))),
    }
}

/// Reads the weights for `init_from`: a trueneg run folder (its latest checkpoint, same model
/// kind), a transformers BERT directory, or an ELECTRA directory with `discriminator/` and
/// `generator/` (or the discriminator's folder, its generator beside it). Checks the configs against the run's encoder (tensor shapes are checked when
/// they are loaded).
pub fn read_transformers_weights(
    dir: &std::path::Path,
    kind: ModelKind,
    expect: &EncoderConfig,
) -> Result<TensorMap> {
    if dir.join("config.toml").is_present() {
        let theirs = ModelSection::read(&dir.join("config.toml"))?;
        if theirs.kind != kind {
            return Err(Error::Config(format!(
                "field `model.init_from`: {} is a {:?} run, this run's model.kind is {kind:?}",
                dir.display(),
                theirs.kind
            )));
        }
        let (_, ck) = super::checkpoint::list(dir).pop().ok_or_else(|| {
            Error::Checkpoint(format!(
                "field `model.init_from`: {} has no checkpoint",
                dir.display()
            ))
        })?;
        return read_safetensors(&ck.join("model.safetensors"));
    }
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
            let (disc_dir, gen_dir) = electra_pair(dir)?;
            let mut disc = check(&disc_dir, true)?;
            let generator = check(&gen_dir, false)?;
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
