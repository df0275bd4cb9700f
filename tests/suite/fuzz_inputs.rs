//! Random corruption of every kind of input trueneg reads, each given to a command that reads
//! it: the answer is a run, or one error line and a non-zero exit; never a panic, an abort or a
//! signal, never more memory than a bound, and the corrupted input is never rewritten.
//!
//! Each kind runs [`CASES`] seeded corruptions (flipped bytes, a cut, inserted bytes, a zeroed
//! range, a repeated range), so the suite's time stays fixed; `TRUENEG_FUZZ_CASES` asks for more.

use std::path::{Path, PathBuf};
use std::process::Command;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::common::{self, data, shards};

/// Corruptions per kind in the suite.
const CASES: u64 = 4;

/// The address-space bound every corrupted run stays under (`ulimit -v`, KiB).
const MEMORY_KIB: u64 = 6_000_000;

fn cases() -> u64 {
    std::env::var("TRUENEG_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES)
}

/// `bytes` corrupted one of five ways chosen by `rng`; `within` bounds where (a header).
fn corrupt(bytes: &mut Vec<u8>, rng: &mut ChaCha8Rng, within: usize) {
    let span = bytes.len().min(within).max(1);
    let at = rng.random_range(0..span);
    match rng.random_range(0..5) {
        0 => {
            for _ in 0..rng.random_range(1..8) {
                let i = rng.random_range(0..span);
                if let Some(b) = bytes.get_mut(i) {
                    *b ^= 1 << rng.random_range(0..8);
                }
            }
        }
        1 => bytes.truncate(at),
        2 => {
            let junk: Vec<u8> = (0..rng.random_range(1..64)).map(|_| rng.random()).collect();
            bytes.splice(at..at, junk);
        }
        3 => {
            let end = (at + rng.random_range(1..256)).min(bytes.len());
            bytes[at.min(end)..end].fill(0);
        }
        _ => {
            let end = (at + rng.random_range(1..256)).min(bytes.len());
            let copy = bytes[at.min(end)..end].to_vec();
            bytes.splice(at..at, copy);
        }
    }
}

/// Runs `command` under the memory bound and checks the answer; `file`, an input, must be as it
/// was (a lock file is the command's own to replace).
fn check_answer(kind: &str, seed: u64, file: &Path, command: Command) {
    let before = std::fs::read(file).unwrap();
    let input = !file.ends_with(".trueneg.lock");
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(|a| a.to_owned()).collect();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_KIB}; exec \"$0\" \"$@\""))
        .arg(program)
        .args(&args)
        .current_dir(command.get_current_dir().unwrap_or(Path::new(".")))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let what = format!("{kind}, seed {seed}: {args:?}\n{err}");
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "exit {code:?} (a signal, a panic or an abort): {what}"
    );
    assert!(!err.contains("panicked"), "a panic: {what}");
    if code != Some(0) {
        let errors = err.lines().filter(|l| l.starts_with("error")).count();
        assert_eq!(errors, 1, "one error line: {what}");
        assert!(!err.contains("os error 2)"), "a raw OS error: {what}");
    }
    if input {
        assert_eq!(
            std::fs::read(file).unwrap(),
            before,
            "input rewritten: {what}"
        );
    }
}

/// Every case of one kind: `setup` makes the valid input in a folder and returns the file to
/// corrupt (and the part of it to corrupt) with the command that reads it.
fn fuzz(kind: &str, within: usize, setup: impl Fn(&Path) -> (PathBuf, Command)) {
    for seed in 0..cases() {
        let dir = tempfile::tempdir().unwrap();
        let (file, command) = setup(dir.path());
        let mut bytes = std::fs::read(&file).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (kind.len() as u64 * 7919));
        corrupt(&mut bytes, &mut rng, within);
        std::fs::write(&file, bytes).unwrap();
        check_answer(kind, seed, &file, command);
    }
}

/// A short text corpus: WikiText-2's first lines.
fn small_text(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(data("wikitext-2/wiki.valid.tokens")).unwrap();
    let path = dir.join("small.txt");
    std::fs::write(&path, text.lines().take(200).collect::<Vec<_>>().join("\n")).unwrap();
    path
}

/// One pre-training step on the corpus in `corpus`.
fn one_step(dir: &Path, corpus: &Path) -> Command {
    let mut c = common::bin();
    c.args(["pretrain", "--config", "tiny", "--run"])
        .arg(dir.join("run"))
        .arg("--set")
        .arg(format!("data.shards={}", corpus.display()))
        .args(["--set", "train.steps=1", "--set", "data.batch_size=4"]);
    c
}

#[test]
fn a_corrupted_manifest_is_one_line() {
    fuzz("manifest", usize::MAX, |dir| {
        let p = dir.join("P");
        common::fixture_cache::copy_tree(shards(), &p);
        (p.join("manifest.json"), one_step(dir, &p))
    });
}

#[test]
fn corrupted_shard_records_are_one_line() {
    fuzz("shard records", usize::MAX, |dir| {
        let p = dir.join("P");
        common::fixture_cache::copy_tree(shards(), &p);
        (p.join("shard-00000.bin"), one_step(dir, &p))
    });
}

#[test]
fn a_corrupted_safetensors_header_is_one_line() {
    fuzz("safetensors header", 4096, |dir| {
        let model = common::transformers_folder(dir, "electra_discriminator");
        (model.join("model.safetensors"), hits(dir, &model))
    });
}

/// Hits of `model` on a few sentences.
fn hits(dir: &Path, model: &Path) -> Command {
    let mut c = common::bin();
    c.args(["hits", "--model"])
        .arg(model)
        .arg("--sentences")
        .arg(small_text(dir))
        .args(["--max", "4"]);
    c
}

#[test]
fn a_corrupted_config_json_is_one_line() {
    fuzz("config.json", usize::MAX, |dir| {
        let model = common::transformers_folder(dir, "electra_discriminator");
        (model.join("config.json"), hits(dir, &model))
    });
}

#[test]
fn a_corrupted_config_toml_is_one_line() {
    fuzz("config.toml", usize::MAX, |dir| {
        let config = dir.join("x.toml");
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/tiny.toml"),
            &config,
        )
        .unwrap();
        let mut c = common::bin();
        c.args(["pretrain", "--config"])
            .arg(&config)
            .arg("--run")
            .arg(dir.join("run"))
            .arg("--set")
            .arg(format!("data.shards={}", shards().display()))
            .args(["--set", "train.steps=1", "--set", "data.batch_size=4"]);
        (config, c)
    });
}

#[test]
fn a_corrupted_tokenizer_is_one_line() {
    fuzz("tokenizer.json", usize::MAX, |dir| {
        let tokenizer = dir.join("tokenizer.json");
        std::fs::copy(shards().join("tokenizer.json"), &tokenizer).unwrap();
        let mut c = common::bin();
        c.args(["prepare", "--input"])
            .arg(small_text(dir))
            .arg("--tokenizer")
            .arg(&tokenizer)
            .arg("--out")
            .arg(dir.join("prep"));
        (tokenizer, c)
    });
}

#[test]
fn a_corrupted_lock_file_is_one_line() {
    fuzz("lock file", usize::MAX, |dir| {
        let out = dir.join("prep");
        std::fs::create_dir_all(&out).unwrap();
        trueneg::io::outputs::set_owner(&out, "trueneg prepare").unwrap();
        let lock = out.join(".trueneg.lock");
        std::fs::write(&lock, "pid 4194303\ntrueneg prepare\n").unwrap();
        let mut c = common::bin();
        c.args(["prepare", "--input"])
            .arg(small_text(dir))
            .args(["--train-vocab", "200", "--out"])
            .arg(&out);
        (lock, c)
    });
}

#[test]
fn a_corrupted_metrics_log_is_one_line() {
    fuzz("metrics.jsonl", usize::MAX, |dir| {
        let run = dir.join("run");
        std::fs::create_dir_all(&run).unwrap();
        for f in ["config.toml", "metrics.jsonl"] {
            std::fs::copy(common::pretrained_tiny_shared().join(f), run.join(f)).unwrap();
        }
        let mut c = common::bin();
        c.args(["compare", "--runs"])
            .arg(&run)
            .arg("--out")
            .arg(dir.join("plot.png"));
        (run.join("metrics.jsonl"), c)
    });
}

#[test]
fn a_corrupted_wordnet_is_one_line() {
    fuzz("WordNet", usize::MAX, |dir| {
        let wordnet = dir.join("wordnet");
        std::fs::create_dir_all(&wordnet).unwrap();
        for f in std::fs::read_dir("/usr/share/wordnet").unwrap() {
            let f = f.unwrap().path();
            if f.is_file() {
                std::fs::copy(&f, wordnet.join(f.file_name().unwrap())).unwrap();
            }
        }
        let mut c = common::bin();
        c.args(["lexicon", "build", "--tokenizer"])
            .arg(shards().join("tokenizer.json"))
            .arg("--wordnet")
            .arg(&wordnet)
            .arg("--out")
            .arg(dir.join("lex.safetensors"));
        (wordnet.join("data.adj"), c)
    });
}

#[test]
fn corrupted_word_vectors_are_one_line() {
    fuzz("word vectors", usize::MAX, |dir| {
        let words = [
            "the", "of", "and", "in", "to", "was", "is", "for", "on", "as",
        ];
        let text: String = words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let v: Vec<String> = (0..8)
                    .map(|d| format!("{:.3}", (i * 8 + d) as f32 / 97.0))
                    .collect();
                format!("{w} {}\n", v.join(" "))
            })
            .collect();
        let vectors = dir.join("vectors.txt");
        std::fs::write(&vectors, text).unwrap();
        let mut c = common::bin();
        c.args(["lexicon", "build", "--tokenizer"])
            .arg(shards().join("tokenizer.json"))
            .arg("--embeddings")
            .arg(&vectors)
            .args(["--top-k", "2", "--out"])
            .arg(dir.join("lex.safetensors"));
        (vectors, c)
    });
}

#[test]
fn corrupted_glue_rows_are_one_line() {
    let models = tempfile::tempdir().unwrap();
    let model = common::finetuned_rte(models.path());
    fuzz("GLUE", usize::MAX, |dir| {
        let glue = dir.join("RTE");
        std::fs::create_dir_all(&glue).unwrap();
        let text = std::fs::read_to_string(data("glue/RTE/dev.tsv")).unwrap();
        let dev = glue.join("dev.tsv");
        std::fs::write(
            &dev,
            text.lines().take(12).collect::<Vec<_>>().join("\n") + "\n",
        )
        .unwrap();
        let mut c = common::bin();
        c.args(["evaluate", "--model"])
            .arg(&model)
            .arg("--data")
            .arg(&dev)
            .arg("--out")
            .arg(dir.join("eval"));
        (dev, c)
    });
}

#[test]
fn a_corrupted_squad_file_is_one_line() {
    fuzz("SQuAD", usize::MAX, |dir| {
        let full: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(data("squad-v1.1/dev-half-a.json")).unwrap(),
        )
        .unwrap();
        let mut article = full["data"][0].clone();
        article["paragraphs"] = serde_json::json!([article["paragraphs"][0].clone()]);
        let squad = dir.join("squad.json");
        std::fs::write(
            &squad,
            serde_json::to_string(&serde_json::json!({"version": "1.1", "data": [article]}))
                .unwrap(),
        )
        .unwrap();
        let mut c = common::bin();
        c.args([
            "attack",
            "--kind",
            "swap-syn-wordnet",
            "--task",
            "squad",
            "--data",
        ])
        .arg(&squad)
        .arg("--out")
        .arg(dir.join("attacked"));
        (squad, c)
    });
}
