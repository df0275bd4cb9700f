//! The encoder fine-tuning starts from: a trueneg run (its latest checkpoint) or a
//! transformers folder, with its tokenizer.

use std::path::{Path, PathBuf};

use crate::interop::read_hf_config;
use crate::interop::tensors::{TensorMap, read_safetensors};
use crate::model::EncoderConfig;
use crate::text::WordPieceTokenizer;
use crate::train::checkpoint;
use crate::train::config::ModelKind;
use crate::{Error, Result};

/// A pre-trained encoder ready for fine-tuning: config, weights (transformers names), the
/// name prefix (`electra` or `bert`) and the tokenizer.
pub struct PretrainedEncoder {
    pub config: EncoderConfig,
    pub weights: TensorMap,
    pub prefix: String,
    pub tokenizer: WordPieceTokenizer,
    pub source: Provenance,
}

/// Where a fine-tuned encoder came from, recorded in `results.json`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Provenance {
    /// The folder given (a trueneg run or a transformers folder).
    pub model: PathBuf,
    /// The weights file read.
    pub weights: PathBuf,
    /// A trueneg run's checkpoint step.
    pub checkpoint_step: Option<u64>,
}

impl Provenance {
    /// `model` as given on the command line; `dir` holds the `model.safetensors` read (paths
    /// made absolute, so that the record means the same from any working directory).
    fn new(model: &Path, dir: &Path, checkpoint_step: Option<u64>) -> Self {
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        Self {
            model: absolute(model),
            weights: absolute(&dir.join("model.safetensors")),
            checkpoint_step,
        }
    }
}

fn find_tokenizer(dirs: &[&Path]) -> Result<WordPieceTokenizer> {
    match crate::text::tokenizer::tokenizer_in(dirs) {
        Some(p) => WordPieceTokenizer::load(&p),
        None => Err(Error::Input(format!(
            "{}: no tokenizer.json or vocab.txt next to the model",
            dirs[0].display()
        ))),
    }
}

/// Refuses a model whose weights alone cannot fit in memory (a mistyped `hidden_size` or
/// `num_hidden_layers` in `source`), before anything is allocated.
pub fn check_model_fits(e: &EncoderConfig, source: &Path) -> Result<()> {
    crate::memory::check(
        crate::model::footprint::weights_bytes(e),
        &format!(
            "{}: a model of hidden_size {} × num_hidden_layers {} (intermediate_size {}, vocab_size {})",
            source.display(),
            e.hidden_size,
            e.num_hidden_layers,
            e.intermediate_size,
            e.vocab_size
        ),
        "are these fields right?",
    )
}

/// Loads a trueneg run directory (its latest checkpoint; ELECTRA's discriminator) or a
/// transformers directory (`config.json` + `model.safetensors`; an ELECTRA export's
/// `discriminator/` is used when present), or a transformers model id in the local Hugging
/// Face cache.
pub fn load_pretrained(model: &Path) -> Result<PretrainedEncoder> {
    let model = &crate::interop::hub_cache::model_dir(model)?;
    use crate::io::folder_kind::{FolderKind, expect};
    expect(
        model,
        &[FolderKind::PretrainRun, FolderKind::Transformers],
        "--model",
        "a pre-trained model (a run's config.toml, or a transformers folder's config.json)",
    )?;
    if model.join("config.toml").exists() {
        let section = crate::train::config::ModelSection::read(&model.join("config.toml"))?;
        let (step, dir) = checkpoint::list(model)
            .pop()
            .ok_or_else(|| Error::Checkpoint(format!("{}: no checkpoint", model.display())))?;
        let weights = read_safetensors(&dir.join("model.safetensors"))?;
        let prefix = match section.kind {
            ModelKind::Electra => "electra",
            ModelKind::Bert => "bert",
        };
        let vocab = weights
            .tensors
            .get(&format!("{prefix}.embeddings.word_embeddings.weight"))
            .map(|t| t.shape[0])
            .ok_or_else(|| Error::Checkpoint(format!("{}: no word embeddings", dir.display())))?;
        let tokenizer = crate::train::run::run_tokenizer(model)?;
        let shapes = weights
            .tensors
            .iter()
            .map(|(k, t)| (k.clone(), t.shape.clone()))
            .collect();
        crate::model::weight_shapes::check_encoder_shapes(
            &section.encoder(vocab),
            &shapes,
            &format!("{prefix}."),
            &dir.join("model.safetensors").display().to_string(),
            &model.join("config.toml").display().to_string(),
        )?;
        return Ok(PretrainedEncoder {
            config: section.encoder(vocab),
            weights,
            prefix: prefix.into(),
            tokenizer,
            source: Provenance::new(model, &dir, Some(step)),
        });
    }
    let dir = if model.join("discriminator/config.json").exists() {
        model.join("discriminator")
    } else {
        model.to_path_buf()
    };
    let hf = read_hf_config(&dir.join("config.json"))?;
    check_model_fits(&hf.encoder, &dir.join("config.json"))?;
    let weights = read_safetensors(&dir.join("model.safetensors"))?;
    let shapes = weights
        .tensors
        .iter()
        .map(|(k, t)| (k.clone(), t.shape.clone()))
        .collect();
    crate::model::weight_shapes::check_encoder_shapes(
        &hf.encoder,
        &shapes,
        &format!("{}.", hf.model_type),
        &dir.join("model.safetensors").display().to_string(),
        &dir.join("config.json").display().to_string(),
    )?;
    let tokenizer = find_tokenizer(&[&dir, model])?;
    if tokenizer.vocab_size() != hf.encoder.vocab_size {
        return Err(Error::Input(format!(
            "{}: field `vocab_size` is {}, the tokenizer has {} tokens",
            dir.join("config.json").display(),
            hf.encoder.vocab_size,
            tokenizer.vocab_size()
        )));
    }
    Ok(PretrainedEncoder {
        config: hf.encoder,
        weights,
        prefix: hf.model_type,
        tokenizer,
        source: Provenance::new(model, &dir, None),
    })
}
