//! The tokenizer files a Hub folder carries beside `tokenizer.json`, as transformers'
//! `save_pretrained` writes them for a WordPiece (BERT / ELECTRA) tokenizer:
//! `tokenizer_config.json` (class, `model_max_length`, casing, special tokens),
//! `special_tokens_map.json` and `vocab.txt` (one piece per line, in id order). Without
//! `model_max_length` transformers takes the length as unbounded and a long input overflows
//! the position embeddings.
//!
//! [`write_folder`] writes a whole Hub folder (weights, tokenizer files, model card,
//! `config.json`), for the pre-trained and the fine-tuned exports alike.

use crate::io::PathQuery;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::hf_config::{HfConfig, write_hf_config};
use super::tensors::{HostTensor, write_safetensors};
use crate::io::outputs::Outputs;
use crate::{Error, Result};

/// The tokenizer's files in a Hub folder.
const TOKENIZER_FILES: [&str; 4] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
];

/// The files the Hub folders `dirs` will hold (`tokenizer`: the tokenizer's too).
fn folder_files(dirs: &[PathBuf], tokenizer: bool) -> Vec<PathBuf> {
    dirs.iter()
        .flat_map(|d| {
            ["model.safetensors", "config.json", "README.md"]
                .into_iter()
                .chain(TOKENIZER_FILES.into_iter().filter(|_| tokenizer))
                .map(|f| d.join(f))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Checks, before anything is written, that an export may write the Hub folders `dirs` under
/// `out`: a whole earlier export there (every folder with its `config.json`) is refused unless
/// forced; files of a half-finished one are replaced when `outputs` allows it (this command
/// wrote them, or `--force`).
pub fn check_folders(
    out: &Path,
    dirs: &[PathBuf],
    tokenizer: bool,
    outputs: &Outputs,
) -> Result<()> {
    if !outputs.forced() && dirs.iter().all(|d| d.join("config.json").is_present()) {
        return Err(Error::Config(format!(
            "{}: already holds an exported model; choose another --out, or pass --force to \
             replace it (nothing was changed)",
            out.display()
        )));
    }
    outputs.check(&folder_files(dirs, tokenizer))
}

/// The `model.safetensors` metadata key of the tokenizer's fingerprint an export was made with.
pub const TOKENIZER_KEY: &str = "trueneg_tokenizer";
/// The metadata key of what the exported weights are (a run's checkpoint, a fine-tuned model).
pub const SOURCE_KEY: &str = "trueneg_source";

/// What an exported folder records of its making, in its weights' metadata: transformers reads
/// only `format` there, and trueneg checks the tokenizer beside the weights against it.
#[derive(Clone, Debug)]
pub struct Provenance {
    /// The fingerprint of the tokenizer the weights were trained with.
    pub tokenizer: String,
    /// What the weights are, in words.
    pub source: String,
}

/// Writes the Hub folder `dir`: `model.safetensors` (`tensors`), the Hub files of `tokenizer`
/// (a `tokenizer.json`) when given, `README.md` (`card`) and, last, `config.json` (`hf`), so
/// that a folder with one holds a whole model and a half-finished export is completed by
/// running it again.
pub fn write_folder(
    dir: &Path,
    tensors: &BTreeMap<String, HostTensor>,
    hf: &HfConfig,
    tokenizer: Option<&Path>,
    card: &str,
    provenance: &Provenance,
    outputs: &Outputs,
) -> Result<PathBuf> {
    crate::io::write::folder(dir)?;
    let meta = HashMap::from([
        ("format".to_string(), "pt".to_string()),
        (TOKENIZER_KEY.to_string(), provenance.tokenizer.clone()),
        (SOURCE_KEY.to_string(), provenance.source.clone()),
    ]);
    let weights = dir.join("model.safetensors");
    write_safetensors(&weights, tensors, Some(meta))?;
    outputs.record(&weights)?;
    if let Some(tokenizer) = tokenizer {
        outputs.write(
            &dir.join("tokenizer.json"),
            &crate::io::read::read(tokenizer, crate::io::limit::TOKENIZER)?,
        )?;
        let class = if hf.model_type == "electra" {
            "ElectraTokenizer"
        } else {
            "BertTokenizer"
        };
        let positions = hf.encoder.max_position_embeddings;
        for (name, bytes) in tokenizer_files(tokenizer, positions, class)? {
            outputs.write(&dir.join(name), &bytes)?;
        }
    }
    outputs.write(&dir.join("README.md"), card.as_bytes())?;
    write_hf_config(&dir.join("config.json"), hf)?;
    outputs.record(&dir.join("config.json"))?;
    Ok(dir.to_path_buf())
}

/// The special tokens' roles and BERT's strings for them.
const SPECIAL: [(&str, &str); 5] = [
    ("unk_token", "[UNK]"),
    ("sep_token", "[SEP]"),
    ("pad_token", "[PAD]"),
    ("cls_token", "[CLS]"),
    ("mask_token", "[MASK]"),
];

/// The Hub tokenizer files of `tokenizer` (a WordPiece `tokenizer.json`), for a model of
/// `max_positions` positions whose tokenizer class is `class` (`BertTokenizer`,
/// `ElectraTokenizer`): (file name, contents).
pub fn tokenizer_files(
    tokenizer: &Path,
    max_positions: usize,
    class: &str,
) -> Result<Vec<(&'static str, Vec<u8>)>> {
    let bad = |why: &str| Error::Input(format!("{}: {why}", tokenizer.display()));
    let t: Value = serde_json::from_slice(&crate::io::read::read(
        tokenizer,
        crate::io::limit::TOKENIZER,
    )?)
    .map_err(|e| bad(&format!("not JSON ({e})")))?;
    let model = &t["model"];
    if model["type"] != "WordPiece" {
        return Err(bad("not a WordPiece tokenizer (model.type)"));
    }
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| bad("no model.vocab"))?;
    let mut pieces: Vec<(u64, &str)> = Vec::with_capacity(vocab.len());
    for (piece, id) in vocab {
        let id = id
            .as_u64()
            .ok_or_else(|| bad("a vocab id is not a number"))?;
        pieces.push((id, piece));
    }
    pieces.sort();
    if pieces
        .iter()
        .enumerate()
        .any(|(i, (id, _))| *id != i as u64)
    {
        return Err(bad("model.vocab's ids are not 0..n"));
    }
    let mut vocab_txt = String::new();
    for (_, piece) in &pieces {
        vocab_txt.push_str(piece);
        vocab_txt.push('\n');
    }
    let lower = t["normalizer"]["lowercase"].as_bool().unwrap_or(false);
    let strip_accents = t["normalizer"]["strip_accents"].clone();
    let mut special = serde_json::Map::new();
    for (role, token) in SPECIAL {
        if !vocab.contains_key(token) {
            return Err(bad(&format!("no {token} in model.vocab")));
        }
        special.insert(role.into(), json!(token));
    }
    let mut config = json!({
        "tokenizer_class": class,
        "model_max_length": max_positions,
        "do_lower_case": lower,
        "strip_accents": strip_accents,
        "tokenize_chinese_chars": true,
        "clean_up_tokenization_spaces": true,
    });
    for (k, v) in &special {
        config[k] = v.clone();
    }
    let pretty = |v: &Value| {
        let mut s = serde_json::to_string_pretty(v).expect("json");
        s.push('\n');
        s.into_bytes()
    };
    Ok(vec![
        ("tokenizer_config.json", pretty(&config)),
        ("special_tokens_map.json", pretty(&Value::Object(special))),
        ("vocab.txt", vocab_txt.into_bytes()),
    ])
}
