//! Every input format the doors read (run files, task files, contrast sets, text, JSONL, Parquet
//! and Arrow corpora), damaged at random: truncated, a bit flipped, a number
//! made huge, a value of the wrong type. Each read gives a result or an error naming the file,
//! never a panic (proptest; a few seconds).

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;

/// One damage done to a file's bytes.
#[derive(Clone, Debug)]
enum Damage {
    /// Cut at this share of the length.
    Truncate(f64),
    /// Flip bit `bit` of the byte at this share of the length.
    Flip(f64, u8),
    /// Replace the digit run at (or after) this share with a 25-digit number.
    Huge(f64),
    /// Replace the digit run at (or after) this share with a string.
    WrongType(f64),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (0.0..1.0f64).prop_map(Damage::Truncate),
        ((0.0..1.0f64), 0u8..8).prop_map(|(p, b)| Damage::Flip(p, b)),
        (0.0..1.0f64).prop_map(Damage::Huge),
        (0.0..1.0f64).prop_map(Damage::WrongType),
    ]
}

fn apply(bytes: &[u8], d: &Damage) -> Vec<u8> {
    let at =
        |share: f64| ((bytes.len() as f64 * share) as usize).min(bytes.len().saturating_sub(1));
    let mut out = bytes.to_vec();
    match *d {
        Damage::Truncate(s) => out.truncate(at(s)),
        Damage::Flip(s, bit) => out[at(s)] ^= 1 << bit,
        Damage::Huge(s) | Damage::WrongType(s) => {
            let Some(start) = (at(s)..bytes.len()).find(|&i| bytes[i].is_ascii_digit()) else {
                return out;
            };
            let end = (start..bytes.len())
                .find(|&i| !bytes[i].is_ascii_digit())
                .unwrap_or(bytes.len());
            let with: &[u8] = match d {
                Damage::Huge(_) => b"9999999999999999999999999",
                _ => b"\"x\"",
            };
            out.splice(start..end, with.iter().copied());
        }
    }
    out
}

/// Writes `bytes` damaged by `d` to `path` and runs `read`: an error is fine, a panic is not.
fn survives<T>(path: &Path, bytes: &[u8], d: &Damage, read: impl Fn() -> trueneg::Result<T>) {
    std::fs::write(path, apply(bytes, d)).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read));
    assert!(r.is_ok(), "{}: a panic on {d:?}", path.display());
    if let Ok(Err(e)) = r {
        assert_eq!(e.to_string().lines().count(), 1, "one line: {e}");
    }
}

/// A run of two steps, made once: its config.toml and a checkpoint's state.json.
fn run() -> &'static Path {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &RUN.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        common::ok(
            common::pretrain_cmd(&run, &["train.steps=3"])
                .output()
                .unwrap(),
        );
        (dir, run)
    })
    .1
}

fn cases() -> ProptestConfig {
    ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn a_damaged_manifest_is_an_error(d in damage()) {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("s");
        common::copy_files(common::shards(), &copy);
        let bytes = std::fs::read(copy.join("manifest.json")).unwrap();
        survives(&copy.join("manifest.json"), &bytes, &d, || {
            trueneg::text::shards::ShardSet::open(&copy)
        });
    }

    #[test]
    fn a_damaged_config_or_state_is_an_error(d in damage()) {
        let dir = tempfile::tempdir().unwrap();
        let config = std::fs::read(run().join("config.toml")).unwrap();
        let path = dir.path().join("config.toml");
        survives(&path, &config, &d, || {
            trueneg::train::config::PretrainConfig::load_file(&path, &[])
        });
        let ck = run().join("checkpoints/step-00000003");
        let state = std::fs::read(ck.join("state.json")).unwrap();
        std::fs::create_dir_all(dir.path().join("ck")).unwrap();
        survives(&dir.path().join("ck/state.json"), &state, &d, || {
            trueneg::train::checkpoint::read_state(&dir.path().join("ck"))
        });
    }

    #[test]
    fn a_damaged_tokenizer_or_safetensors_file_is_an_error(d in damage()) {
        let dir = tempfile::tempdir().unwrap();
        let tok = std::fs::read(common::shards().join("tokenizer.json")).unwrap();
        let path = dir.path().join("tokenizer.json");
        survives(&path, &tok, &d, || trueneg::text::WordPieceTokenizer::load(&path));
        let st = std::fs::read(common::shared("golden/electra_discriminator/model.safetensors"))
            .unwrap();
        let path = dir.path().join("model.safetensors");
        survives(&path, &st, &d, || trueneg::interop::tensors::read_safetensors(&path));
        let cfg = std::fs::read(common::shared("golden/electra_discriminator/config.json")).unwrap();
        let path = dir.path().join("config.json");
        survives(&path, &cfg, &d, || trueneg::interop::read_hf_config(&path));
    }

    #[test]
    fn damaged_task_files_are_errors(d in damage()) {
        use trueneg::tasks::glue::GlueTask;
        let dir = tempfile::tempdir().unwrap();
        for (task, file) in [(GlueTask::named("rte"), "RTE"), (GlueTask::named("stsb"), "STS-B"), (GlueTask::named("cola"), "CoLA")] {
            let text = std::fs::read_to_string(common::data(&format!("glue/{file}/dev.tsv"))).unwrap();
            let head: String = text.lines().take(12).collect::<Vec<_>>().join("\n");
            let path = dir.path().join(format!("{file}.tsv"));
            survives(&path, head.as_bytes(), &d, || trueneg::tasks::glue::read_glue(task, &path));
        }
        let squad: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(common::data("squad-v1.1/dev-half-a.json")).unwrap(),
        )
        .unwrap();
        let mut small = squad.clone();
        small["data"] = serde_json::json!([{
            "title": squad["data"][0]["title"],
            "paragraphs": [squad["data"][0]["paragraphs"][0]],
        }]);
        let path = dir.path().join("squad.json");
        survives(&path, small.to_string().as_bytes(), &d, || {
            trueneg::tasks::squad::read_squad(&path)
        });
    }

    #[test]
    fn damaged_corpus_files_are_errors(d in damage()) {
        let dir = tempfile::tempdir().unwrap();
        let jsonl = (0..20)
            .map(|i| serde_json::json!({"text": format!("Line {i} of a document.")}).to_string())
            .collect::<Vec<_>>()
            .join("\n");
        for (name, bytes) in [("c.jsonl", jsonl.into_bytes()), ("c.txt", b"Some text.\n\nMore text here.\n".to_vec())] {
            let path = dir.path().join(name);
            survives(&path, &bytes, &d, || {
                let mut r = trueneg::text::corpus::CorpusReader::open(&path)?;
                while !r.next_batch(1 << 16)?.is_empty() {}
                Ok(())
            });
        }
    }

    #[test]
    fn damaged_contrast_sets_are_errors(d in damage()) {
        use trueneg::tasks::contrast::{read_boolq_contrast, read_cad_sentiment, read_perspectrum_contrast};
        let dir = tempfile::tempdir().unwrap();
        let head = |rel: &str, lines: usize| -> Vec<u8> {
            let text = std::fs::read_to_string(common::data(rel)).unwrap();
            text.lines().take(lines).collect::<Vec<_>>().join("\n").into_bytes()
        };
        let cad = dir.path().join("dev_paired.tsv");
        let cad_bytes = head("counterfactual/sentiment/combined/paired/dev_paired.tsv", 9);
        survives(&cad, &cad_bytes, &d, || read_cad_sentiment(&cad));
        let persp = dir.path().join("perspectrum.csv");
        let persp_bytes = head("contrast-sets/perspectrum/perspectrum_contrast_sets.csv", 9);
        survives(&persp, &persp_bytes, &d, || read_perspectrum_contrast(&persp));
        let boolq: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(common::data("contrast-sets/BoolQ/boolq_perturbed.json")).unwrap(),
        )
        .unwrap();
        let mut small = boolq.clone();
        small["data"] = serde_json::json!([boolq["data"][1], boolq["data"][2]]);
        let path = dir.path().join("boolq.json");
        survives(&path, small.to_string().as_bytes(), &d, || read_boolq_contrast(&path));
    }

    #[test]
    fn damaged_parquet_and_arrow_corpora_are_errors(d in damage()) {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [("c.parquet", parquet_bytes()), ("c.arrow", arrow_bytes())] {
            let path = dir.path().join(name);
            survives(&path, &bytes, &d, || {
                let mut r = trueneg::text::corpus::CorpusReader::open(&path)?;
                while !r.next_batch(1 << 16)?.is_empty() {}
                Ok(())
            });
        }
    }
}

/// Twenty short documents as a `text` column.
fn text_batch() -> arrow_array::RecordBatch {
    let docs: Vec<String> = (0..20)
        .map(|i| format!("Document {i} has a sentence."))
        .collect();
    let column: arrow_array::ArrayRef = std::sync::Arc::new(arrow_array::StringArray::from(docs));
    arrow_array::RecordBatch::try_from_iter([("text", column)]).unwrap()
}

/// A Parquet file of [`text_batch`].
fn parquet_bytes() -> Vec<u8> {
    let b = text_batch();
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, b.schema(), None).unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
    out
}

/// An Arrow IPC stream (what `datasets` saves) of [`text_batch`].
fn arrow_bytes() -> Vec<u8> {
    let b = text_batch();
    let mut out = Vec::new();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &b.schema()).unwrap();
    w.write(&b).unwrap();
    w.finish().unwrap();
    drop(w);
    out
}
