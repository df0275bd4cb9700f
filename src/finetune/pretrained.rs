//! The encoder fine-tuning starts from: a trueneg run (its latest checkpoint) or a
//! transformers folder, with its tokenizer.

use crate::io::PathQuery;
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
    /// How the encoder was pre-trained, in words: a trueneg run's objective (its
    /// `config.toml`), or what a trueneg export records of its source; none for a folder of
    /// another maker.
    #[serde(default)]
    pub pretraining: Option<String>,
}

impl Provenance {
    /// `model` as given on the command line; `dir` holds the `model.safetensors` read (paths
    /// made absolute, so that the record means the same from any working directory).
    fn new(
        model: &Path,
        dir: &Path,
        checkpoint_step: Option<u64>,
        pretraining: Option<String>,
    ) -> Self {
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        Self {
            model: absolute(model),
            weights: absolute(&dir.join("model.safetensors")),
            checkpoint_step,
            pretraining,
        }
    }
}

/// A run's pre-training objective as its `config.toml` records it (`[objective] kind`; the
/// default objective when the table leaves it out).
fn run_objective(config: &Path) -> Result<String> {
    let text = crate::io::read::read_text(config, crate::io::limit::SMALL)?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", config.display())))?;
    let kind = table
        .get("objective")
        .and_then(|o| o.get("kind"))
        .and_then(|k| k.as_str())
        .unwrap_or(crate::objective::ObjectiveKind::default().name());
    Ok(format!("objective `{kind}`"))
}

/// A folder trueneg exported records its tokenizer's fingerprint in its weights' metadata: the
/// tokenizer found beside them must be that one. A folder trueneg's export wrote without the
/// record is refused; a folder of another maker (the Hub's) is read as it is.
fn check_exported_tokenizer(weights: &Path, tokenizer: &WordPieceTokenizer) -> Result<()> {
    use crate::interop::hub::TOKENIZER_KEY;
    let recorded = crate::io::tensor_file::metadata(weights)?;
    let exported = crate::io::outputs::writer(weights).is_some_and(|w| w.ends_with(" export"));
    if exported || recorded.contains_key(TOKENIZER_KEY) {
        crate::io::tensor_file::require_fingerprint(weights)?;
    }
    match recorded.get(TOKENIZER_KEY) {
        Some(f) if *f != tokenizer.fingerprint() => Err(Error::Input(format!(
            "{}: made for another tokenizer than the one beside it (its metadata records fingerprint {}…, the tokenizer's is {}…); put the exported tokenizer back, or export again",
            weights.display(),
            f.get(..12).unwrap_or(f),
            tokenizer.fingerprint().get(..12).unwrap_or("")
        ))),
        None if exported => Err(Error::Input(format!(
            "{}: written by trueneg export without its tokenizer's fingerprint (`{TOKENIZER_KEY}` in its metadata); export it again",
            weights.display()
        ))),
        _ => Ok(()),
    }
}

/// The tokenizer of a transformers folder `dir` whose weights are `weights`, checked against
/// the fingerprint a trueneg export records.
pub(crate) fn folder_tokenizer(dir: &Path, weights: &Path) -> Result<WordPieceTokenizer> {
    let tokenizer = find_tokenizer(&[dir])?;
    check_exported_tokenizer(weights, &tokenizer)?;
    Ok(tokenizer)
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

/// What a fine-tuned model's `finetuned.json` says of its encoder.
#[derive(serde::Deserialize)]
struct FinetunedEncoder {
    task: serde_json::Value,
    prefix: String,
    config: EncoderConfig,
}

/// A fine-tuned model (a `seed-N` folder) as the start of more fine-tuning: its encoder, and
/// its head's weights, which the classifier keeps where they fit the new head
/// (`Classifier::from_pretrained`).
fn load_finetuned_encoder(dir: &Path) -> Result<PretrainedEncoder> {
    let (info, weights, tokenizer) = super::folder::read_model_folder::<FinetunedEncoder>(dir)?;
    check_model_fits(&info.config, &dir.join("finetuned.json"))?;
    let source = Provenance::new(
        dir,
        dir,
        None,
        Some(format!(
            "the fine-tuned model {} ({})",
            dir.display(),
            info.task.as_str().unwrap_or("a task")
        )),
    );
    Ok(PretrainedEncoder {
        config: info.config,
        weights,
        prefix: info.prefix,
        tokenizer,
        source,
    })
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

/// The content fingerprint (SHA-256) of the weights [`load_pretrained`] reads from `model`: work
/// that continues from a model (a re-run of `finetune`) records it, and refuses to mix its
/// results with those of other weights under the same name (a run pre-trained further).
pub fn weights_fingerprint(model: &Path) -> Result<String> {
    let model = &crate::interop::hub_cache::model_dir(model)?;
    let file = if model.join("config.toml").is_present() {
        checkpoint::list(model)
            .pop()
            .map(|(_, dir)| dir.join("model.safetensors"))
            .ok_or_else(|| Error::Checkpoint(format!("{}: no checkpoint", model.display())))?
    } else if model.join("discriminator/config.json").is_present() {
        model.join("discriminator/model.safetensors")
    } else {
        model.join("model.safetensors")
    };
    // A file trueneg wrote records its tensors' fingerprint, checked whenever it is opened: its
    // header says it without reading the weights. Another maker's file is hashed whole.
    match crate::io::tensor_file::metadata(&file)?.remove(crate::io::tensor_file::WEIGHTS_KEY) {
        Some(recorded) => Ok(recorded),
        None => crate::io::read::sha256(&file),
    }
}

/// Loads a trueneg run directory (its latest checkpoint; ELECTRA's discriminator) or a
/// transformers directory (`config.json` + `model.safetensors`; an ELECTRA export's
/// `discriminator/` is used when present), or a transformers model id in the local Hugging
/// Face cache.
pub fn load_pretrained(model: &Path) -> Result<PretrainedEncoder> {
    let model = &crate::interop::hub_cache::model_dir(model)?;
    use crate::io::folder_kind::{FolderKind, expect};
    let kind = expect(
        model,
        &[
            FolderKind::PretrainRun,
            FolderKind::Transformers,
            FolderKind::Finetuned,
        ],
        "--model",
        "a pre-trained model (a run's config.toml, a transformers folder's config.json) or a fine-tuned one (finetuned.json)",
    )?;
    if kind == FolderKind::Finetuned {
        return load_finetuned_encoder(model);
    }
    if model.join("config.toml").is_present() {
        let section = crate::train::config::ModelSection::read(&model.join("config.toml"))?;
        let (step, dir) = checkpoint::list(model)
            .pop()
            .ok_or_else(|| Error::Checkpoint(format!("{}: no checkpoint", model.display())))?;
        crate::io::tensor_file::require_fingerprint(&dir.join("model.safetensors"))?;
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
        crate::interop::weight_shapes::check_encoder_shapes(
            &section.encoder(vocab),
            &weights.tensors,
            &format!("{prefix}."),
            &dir.join("model.safetensors").display().to_string(),
            &model.join("config.toml").display().to_string(),
        )?;
        return Ok(PretrainedEncoder {
            config: section.encoder(vocab),
            weights,
            prefix: prefix.into(),
            tokenizer,
            source: Provenance::new(
                model,
                &dir,
                Some(step),
                Some(run_objective(&model.join("config.toml"))?),
            ),
        });
    }
    let dir = if model.join("discriminator/config.json").is_present() {
        model.join("discriminator")
    } else {
        model.to_path_buf()
    };
    let hf = read_hf_config(&dir.join("config.json"))?;
    check_model_fits(&hf.encoder, &dir.join("config.json"))?;
    let weights = read_safetensors(&dir.join("model.safetensors"))?;
    crate::interop::weight_shapes::check_encoder_shapes(
        &hf.encoder,
        &weights.tensors,
        &format!("{}.", hf.model_type),
        &dir.join("model.safetensors").display().to_string(),
        &dir.join("config.json").display().to_string(),
    )?;
    let tokenizer = find_tokenizer(&[&dir, model])?;
    check_exported_tokenizer(&dir.join("model.safetensors"), &tokenizer)?;
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
        source: Provenance::new(
            model,
            &dir,
            None,
            crate::io::tensor_file::metadata(&dir.join("model.safetensors"))?
                .remove(crate::interop::hub::SOURCE_KEY),
        ),
    })
}
