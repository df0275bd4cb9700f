//! The tokenizer files a Hub folder carries beside `tokenizer.json`, as transformers'
//! `save_pretrained` writes them for a WordPiece (BERT / ELECTRA) tokenizer:
//! `tokenizer_config.json` (class, `model_max_length`, casing, special tokens),
//! `special_tokens_map.json` and `vocab.txt` (one piece per line, in id order). Without
//! `model_max_length` transformers takes the length as unbounded and a long input overflows
//! the position embeddings.

use std::path::Path;

use serde_json::{Value, json};

use crate::{Error, Result};

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
    let t: Value = serde_json::from_slice(&crate::error::read(tokenizer)?)
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
