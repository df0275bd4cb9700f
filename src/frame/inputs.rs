//! The kinds of paths commands read, and the one check of each: a path of the wrong kind is one
//! line naming it, what it is and what its flag takes, before any work (never an OS error
//! later, from deep inside a reader).

use std::path::Path;

use crate::io::folder_kind::{FolderKind, expect};
use crate::{Error, Result};

/// What a command takes at one of its paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Text to pre-train on (`prepare --input`): text, JSONL, Parquet or Arrow files, or
    /// folders of them; not a folder trueneg wrote.
    TextCorpus,
    /// A corpus to read examples from (`stats`, `inspect`): a text file, a folder of text
    /// files, or a prepared corpus.
    Corpus,
    /// `prepare`'s shards (`manifest.json`).
    PreparedCorpus,
    /// `pretrain`'s run folder (`config.toml`).
    Run,
    /// One fine-tuned model (`finetuned.json`).
    Finetuned,
    /// A pre-trained encoder: a run, or a transformers folder (a name that is no path may be a
    /// model of the local Hugging Face cache, which the loader resolves).
    Encoder,
    /// A fine-tuned classifier for `evaluate`: a trueneg fine-tuned model, or a transformers
    /// folder (which names its task).
    FinetunedOrExport,
    /// What `finetune` starts from: an encoder as [`InputKind::Encoder`], or a fine-tuned
    /// model, which continues.
    FinetuneStart,
    /// A task's data (GLUE, SQuAD, a contrast set): a folder or a file.
    TaskData,
    /// The WordNet database: a folder.
    WordNet,
    /// One file of a kind of its own.
    File(FileKind),
}

/// The kinds of single files commands read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// `tokenizer.json` or BERT's `vocab.txt`.
    Tokenizer,
    /// `lexicon build`'s synonym table.
    Lexicon,
    /// Word vectors (word2vec, GloVe).
    Vectors,
    /// A checkpoint's weights.
    Checkpoint,
    /// A pre-training config.
    Config,
    /// Sentences, one a line.
    Sentences,
    /// Stop words, one a line.
    StopWords,
}

impl FileKind {
    /// The kind in words.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Tokenizer => "a tokenizer.json or BERT vocab.txt",
            Self::Lexicon => "a lexicon (lexicon build's .safetensors)",
            Self::Vectors => "word vectors (word2vec text or binary, or GloVe)",
            Self::Checkpoint => "a checkpoint's model.safetensors",
            Self::Config => "a TOML config",
            Self::Sentences => "a text file of sentences",
            Self::StopWords => "a stop-word list (one word a line)",
        }
    }
}

impl InputKind {
    /// What the kind takes, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Self::TextCorpus => "text files (.txt, .jsonl, .parquet, .arrow) or folders of them",
            Self::Corpus => "a text file, a folder of text files, or a prepared corpus",
            Self::PreparedCorpus => "a prepared corpus (prepare's folder, with manifest.json)",
            Self::Run => "a pre-training run (its folder, with config.toml)",
            Self::Finetuned => "a fine-tuned model (a seed-N folder of finetune)",
            Self::Encoder => {
                "a pre-trained model (a run's folder, or a transformers folder with config.json)"
            }
            Self::FinetunedOrExport => {
                "a fine-tuned model (a seed-N folder of finetune, or a transformers folder with config.json)"
            }
            Self::FinetuneStart => {
                "a model to fine-tune (a run's folder, a transformers folder with config.json, or a fine-tuned model's seed-N folder)"
            }
            Self::TaskData => "a task's data (its folder or file)",
            Self::WordNet => "the WordNet database (a dict folder, or a WordNet home holding one)",
            Self::File(kind) => kind.describe(),
        }
    }

    /// The folder kinds a folder input takes (`None` for the inputs checked otherwise).
    fn folder_kinds(self) -> Option<&'static [FolderKind]> {
        use FolderKind::{Finetuned, PreparedCorpus, PretrainRun, Transformers};
        Some(match self {
            Self::PreparedCorpus => &[PreparedCorpus],
            Self::Run => &[PretrainRun],
            Self::Finetuned => &[Finetuned],
            Self::Encoder => &[PretrainRun, Transformers],
            Self::FinetunedOrExport => &[Finetuned, Transformers],
            Self::FinetuneStart => &[PretrainRun, Transformers, Finetuned],
            _ => return None,
        })
    }
}

/// What is at `path`, in words, for a refusal.
fn found(path: &Path) -> String {
    match FolderKind::of(path) {
        Some(kind) => kind.describe().to_string(),
        None => match crate::io::read::regular_file(path) {
            Ok(_) => "a file".into(),
            Err(e) => e.to_string(),
        },
    }
}

/// What to do about a missing input: a name beside it within two edits ("did you mean"), and
/// for a prepared corpus, the command that makes one.
fn missing_hint(path: &Path, kind: InputKind) -> String {
    let mut hint = String::new();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) {
        let names = crate::io::read::names(parent);
        if let Some(n) = crate::error::nearest(&name, names.iter().map(String::as_str)) {
            hint += &format!(" (did you mean {}?)", parent.join(n).display());
        }
    }
    if kind == InputKind::PreparedCorpus {
        hint += &format!(
            "; `trueneg prepare --input <text> --out {}` makes one",
            path.display()
        );
    }
    hint
}

fn refuse(path: &Path, flag: &str, kind: InputKind, is: &str) -> Error {
    Error::Input(format!(
        "{}: is {is}; {flag} takes {}",
        path.display(),
        kind.describe()
    ))
}

/// Checks that `path`, given as `flag`, is of `kind`.
pub fn classify(path: &Path, flag: &str, kind: InputKind) -> Result<()> {
    let exists = crate::io::read::exists(path);
    if !exists && matches!(kind, InputKind::Encoder | InputKind::FinetuneStart) {
        return Ok(());
    }
    if !exists {
        let advice = format!(
            "no such file or folder; {flag} takes {}{}",
            kind.describe(),
            missing_hint(path, kind)
        );
        return Err(Error::missing(path, &advice));
    }
    let folder = crate::io::read::is_folder(path);
    let wanted = kind.describe();
    let folder_kind = kind.folder_kinds().is_some() || kind == InputKind::WordNet;
    if folder_kind && !folder {
        return Err(refuse(path, flag, kind, &found(path)));
    }
    match kind {
        InputKind::PreparedCorpus
        | InputKind::Run
        | InputKind::Finetuned
        | InputKind::Encoder
        | InputKind::FinetunedOrExport
        | InputKind::FinetuneStart => {
            let kinds = kind.folder_kinds().unwrap_or_default();
            expect(path, kinds, flag, wanted).map(drop)
        }
        InputKind::TextCorpus => match FolderKind::of(path) {
            Some(FolderKind::Other) | None
                if folder || crate::io::read::regular_file(path).is_ok() =>
            {
                Ok(())
            }
            _ => Err(refuse(path, flag, kind, &found(path))),
        },
        InputKind::Corpus => match FolderKind::of(path) {
            Some(FolderKind::Other | FolderKind::PreparedCorpus) => Ok(()),
            Some(_) => Err(refuse(path, flag, kind, &found(path))),
            None => crate::io::read::regular_file(path).map(drop),
        },
        InputKind::TaskData => {
            if folder {
                Ok(())
            } else {
                crate::io::read::regular_file(path).map(drop)
            }
        }
        InputKind::WordNet => Ok(()),
        InputKind::File(_) => {
            if folder {
                Err(refuse(path, flag, kind, &found(path)))
            } else {
                crate::io::read::regular_file(path).map(drop)
            }
        }
    }
}
