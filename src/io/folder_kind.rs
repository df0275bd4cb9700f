//! What a folder given on the command line is, from the files that mark each kind trueneg
//! writes or reads, so that a command given the wrong kind says which kind it got and which it
//! takes, instead of failing later on a missing file.

use std::path::Path;

use crate::{Error, Result};

/// The kinds of folders the commands take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FolderKind {
    /// `pretrain`'s run folder (`config.toml`).
    PretrainRun,
    /// One fine-tuned model (`finetuned.json`), a `seed-N` folder of `finetune`.
    Finetuned,
    /// `finetune`'s output for one task (`results.json` beside its `seed-N` folders).
    FinetuneOutput,
    /// A transformers model folder (`config.json`, or an ELECTRA export's `discriminator/`).
    Transformers,
    /// `prepare`'s shards (`manifest.json`).
    PreparedCorpus,
    /// `ablation`'s folder (`experiment.json`).
    Ablation,
    /// A folder that holds none of these.
    Other,
}

impl FolderKind {
    /// The kind of the folder `dir` (`None` when `dir` is no folder).
    pub fn of(dir: &Path) -> Option<Self> {
        if !super::read::is_folder(dir) {
            return None;
        }
        let has = |f: &str| super::read::exists(&dir.join(f));
        Some(if has("finetuned.json") {
            Self::Finetuned
        } else if has("config.toml") {
            Self::PretrainRun
        } else if has("manifest.json") {
            Self::PreparedCorpus
        } else if has("experiment.json") {
            Self::Ablation
        } else if has("config.json") || has("discriminator/config.json") {
            Self::Transformers
        } else if has("results.json") {
            Self::FinetuneOutput
        } else {
            Self::Other
        })
    }

    /// The kind in words, with the file that marks it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::PretrainRun => "a pre-training run (config.toml)",
            Self::Finetuned => "a fine-tuned model (finetuned.json)",
            Self::FinetuneOutput => "a fine-tuning output (results.json and seed-N folders)",
            Self::Transformers => "a transformers model folder (config.json)",
            Self::PreparedCorpus => "a prepared corpus (manifest.json)",
            Self::Ablation => "an ablation folder (experiment.json)",
            Self::Other => {
                "a folder without config.toml, finetuned.json, config.json or manifest.json"
            }
        }
    }

    /// What to give instead, where the kind found suggests it.
    fn hint(self, dir: &Path) -> String {
        match self {
            Self::FinetuneOutput => format!(
                "; give one of its models, such as {}",
                dir.join("seed-1").display()
            ),
            Self::PretrainRun => format!(
                "; a command's --run takes a pre-training run (`export --run {}`), and \
                 `finetune --model` fine-tunes it",
                dir.display()
            ),
            Self::Finetuned => format!(
                "; a fine-tuned model is given as --model (`export --model {0}`, `evaluate \
                 --model {0}`)",
                dir.display()
            ),
            _ => String::new(),
        }
    }
}

/// Checks that `dir`, given as `flag`, is one of the `accepted` kinds (`wanted` says them in
/// words); the error names the kind found and, where it helps, what to give instead.
pub fn expect(dir: &Path, accepted: &[FolderKind], flag: &str, wanted: &str) -> Result<FolderKind> {
    let kind = match FolderKind::of(dir) {
        Some(kind) => kind,
        // Missing, or a file: the door's own line says which.
        None => super::read::folder(dir).map(|()| FolderKind::Other)?,
    };
    if accepted.contains(&kind) {
        return Ok(kind);
    }
    Err(Error::Input(format!(
        "{}: is {}; {flag} takes {wanted}{}",
        dir.display(),
        kind.describe(),
        kind.hint(dir)
    )))
}
