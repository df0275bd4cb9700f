//! Helpers shared by the integration tests: paths into ../shared and running the binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use burn::prelude::*;
use std::process::{Command, Output};
use std::sync::OnceLock;

pub mod fixture_cache;

/// A path under ../shared (the data sets and the transformers fixtures).
pub fn shared(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(p)
}

/// A path under ../shared/data.
pub fn data(p: &str) -> PathBuf {
    shared("data").join(p)
}

/// The `trueneg` binary, without progress bars.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_trueneg"));
    c.arg("--quiet");
    c
}

/// `trueneg export --run <run> --out <out>`, to which a test adds its own arguments.
pub fn export_cmd(run: &Path, out: &Path) -> Command {
    let mut c = bin();
    c.args(["export", "--run"]).arg(run).arg("--out").arg(out);
    c
}

/// `trueneg pretrain --resume <run>`, to which a test adds its own arguments.
pub fn resume_cmd(run: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = bin();
    c.args(["pretrain", "--resume"]).arg(run);
    c
}

/// Asserts that the command succeeded and returns its stdout.
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every line of a run's `metrics.jsonl`.
/// The step lines of a run's `metrics.jsonl` (its records, `"record": …`, left out); every
/// one must parse.
pub fn metrics(run: &Path) -> Vec<trueneg::train::pretrain::StepMetrics> {
    metrics_lines(run)
        .into_iter()
        .filter(|v| v.get("record").is_none())
        .map(|v| serde_json::from_value(v).unwrap())
        .collect()
}

/// The records named `name` of a run's `metrics.jsonl`.
pub fn records(run: &Path, name: &str) -> Vec<serde_json::Value> {
    metrics_lines(run)
        .into_iter()
        .filter(|v| v["record"] == name)
        .collect()
}

fn metrics_lines(run: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// (step, loss, gradient norm) of every line of a run's `metrics.jsonl`.
pub fn losses(run: &Path) -> Vec<(u64, f64, f64)> {
    metrics(run)
        .into_iter()
        .map(|m| (m.step, m.loss, m.grad_norm))
        .collect()
}

/// `trueneg prepare`'s arguments for WikiText-2's test split: a vocabulary of `vocab` pieces
/// trained on it, 64-token examples.
fn wikitext_args(vocab: &str) -> [&str; 4] {
    ["--train-vocab", vocab, "--max-seq-len", "64"]
}

/// `trueneg prepare` of WikiText-2's test split into `out` ([`wikitext_args`]).
fn prepare_wikitext_with(vocab: &str, out: &Path) {
    ok(bin()
        .args(["prepare", "--input"])
        .arg(data("wikitext-2/wiki.test.raw"))
        .args(wikitext_args(vocab))
        .arg("--out")
        .arg(out)
        .output()
        .unwrap());
}

/// `trueneg prepare` of WikiText-2's test split into `out`: a 2000-token vocabulary trained on
/// it, 64-token examples.
pub fn prepare_wikitext(out: &Path) {
    prepare_wikitext_with("2000", out);
}

/// Fails with exit code ≠ 0 and a one-line error; returns that line.
pub fn fails(out: Output) -> String {
    assert!(
        !out.status.success(),
        "should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

/// The files of folder `from` copied into `to` (created; files already there replaced).
pub fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in std::fs::read_dir(from).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
    }
}

/// WikiText-2's test split prepared with a vocabulary of `vocab` pieces trained on it, 64-token
/// examples: built once (see [`fixture_cache`]); read it, or copy it to change it.
fn wikitext_corpus(vocab: usize) -> PathBuf {
    let input = data("wikitext-2/wiki.test.raw");
    let vocab = vocab.to_string();
    let recipe = fixture_cache::Recipe {
        name: &format!("wikitext-{vocab}"),
        inputs: &[&input],
        args: &wikitext_args(&vocab),
    };
    fixture_cache::cached(&recipe, |dir| {
        prepare_wikitext_with(&vocab, &dir.join("corpus"))
    })
    .join("corpus")
}

/// The arguments of the tiny pre-trained run that [`pretrained_tiny`] copies.
const TINY_RUN: [&str; 7] = [
    "pretrain",
    "--config",
    "tiny",
    "--set",
    "train.steps=20",
    "--set",
    "model.max_position_embeddings=128",
];

/// A tiny ELECTRA pre-trained for 20 steps on WikiText-2's test split (its own 3,000-piece
/// vocabulary, 128 positions), built once; each call gets a copy of its own in `dir/run`.
pub fn pretrained_tiny(dir: &Path) -> PathBuf {
    let run = dir.join("run");
    fixture_cache::copy_tree(pretrained_tiny_shared(), &run);
    run
}

/// The run [`pretrained_tiny`] copies, for the tests that only read it.
pub fn pretrained_tiny_shared() -> &'static Path {
    static RUN: OnceLock<PathBuf> = OnceLock::new();
    RUN.get_or_init(|| {
        let corpus = wikitext_corpus(3000);
        let shards = format!("data.shards={}", corpus.display());
        let mut args = TINY_RUN.to_vec();
        args.extend(["--set", shards.as_str()]);
        let recipe = fixture_cache::Recipe {
            name: "tiny-run",
            inputs: &[],
            args: &args,
        };
        fixture_cache::cached(&recipe, |dir| {
            ok(bin()
                .args(&args)
                .arg("--run")
                .arg(dir.join("run"))
                .output()
                .unwrap());
        })
        .join("run")
    })
}

/// ../shared/golden's `folder` (`electra_discriminator`, `bert_tiny`: vocabulary 100) as a
/// transformers folder in `dir` with a vocabulary file of its size.
pub fn transformers_folder(dir: &Path, folder: &str) -> PathBuf {
    let model = dir.join(folder);
    std::fs::create_dir_all(&model).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(shared("golden").join(folder).join(f), model.join(f)).unwrap();
    }
    let mut vocab: Vec<String> = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"]
        .map(String::from)
        .to_vec();
    vocab.extend((5..100).map(|i| format!("w{i}")));
    std::fs::write(model.join("vocab.txt"), vocab.join("\n")).unwrap();
    model
}

/// The arguments of the fine-tuning that [`finetuned_rte`] copies.
const RTE_FINETUNING: [&str; 13] = [
    "finetune",
    "--task",
    "rte",
    "--seeds",
    "1",
    "--epochs",
    "1",
    "--max-seq-len",
    "32",
    "--max-train-examples",
    "8",
    "--max-eval-examples",
    "8",
];

/// ../shared/golden's ELECTRA discriminator fine-tuned on RTE (one seed, one epoch, 8
/// examples, 32 tokens), built once; each call gets a copy of its own fine-tuning folder in
/// `dir/ft`, and the seed's folder (`dir/ft/seed-1`) is returned.
pub fn finetuned_rte(dir: &Path) -> PathBuf {
    static FT: OnceLock<PathBuf> = OnceLock::new();
    let cached = FT.get_or_init(|| {
        let golden = shared("golden/electra_discriminator");
        let (config, weights) = (golden.join("config.json"), golden.join("model.safetensors"));
        // The base model is a fixture of its own: the fine-tuning records its path.
        let base = fixture_cache::cached(
            &fixture_cache::Recipe {
                name: "golden-electra",
                inputs: &[&config, &weights],
                args: &[],
            },
            |dir| {
                transformers_folder(dir, "electra_discriminator");
            },
        )
        .join("electra_discriminator");
        let rte = data("glue/RTE");
        let (train, dev) = (rte.join("train.tsv"), rte.join("dev.tsv"));
        let base_arg = base.display().to_string();
        let mut args = RTE_FINETUNING.to_vec();
        args.extend(["--model", base_arg.as_str()]);
        let recipe = fixture_cache::Recipe {
            name: "finetuned-rte",
            inputs: &[&train, &dev],
            args: &args,
        };
        fixture_cache::cached(&recipe, |dir| {
            ok(bin()
                .args(&args)
                .arg("--data")
                .arg(&rte)
                .arg("--out")
                .arg(dir.join("ft"))
                .output()
                .unwrap());
        })
    });
    fixture_cache::copy_tree(cached, dir);
    dir.join("ft/seed-1")
}

/// The Python interpreter (`TRUENEG_PYTHON`, else `python3`) when it imports `modules`
/// (comma-separated); `TRUENEG_PYTHON`, when set, must. `None`, with a note, otherwise.
pub fn python_with(modules: &str) -> Option<String> {
    let python = std::env::var("TRUENEG_PYTHON").unwrap_or_else(|_| "python3".into());
    let has = Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        assert!(
            std::env::var("TRUENEG_PYTHON").is_err(),
            "TRUENEG_PYTHON={python} cannot import {modules}"
        );
        eprintln!("Python cannot import {modules}: the check against it is not run");
        return None;
    }
    Some(python)
}

/// The user documentation: `README.md` and `docs/*.md` (name order), as (file, text).
pub fn readme_and_docs() -> Vec<(String, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|f| {
            let name = f.strip_prefix(&root).unwrap().display().to_string();
            (name, std::fs::read_to_string(&f).unwrap())
        })
        .collect()
}

/// A second tokenizer (1500 tokens, trained on SQuAD text), for the tests of mismatches.
pub fn other_tokenizer() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/squad/tokenizer.json")
}

/// WikiText-2's test split prepared once for all tests (a 2,000-piece vocabulary trained on
/// it, 64-token examples), as [`prepare_wikitext`] prepares it. Read it; copy it to change it.
pub fn shards() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| wikitext_corpus(2000))
}

/// `trueneg finetune` of `task` on `data` from `model` into `out`, to add flags to.
pub fn finetune_cmd(task: &str, data: &Path, model: &Path, out: &Path) -> Command {
    let mut c = bin();
    c.args(["finetune", "--task", task, "--data"])
        .arg(data)
        .arg("--model")
        .arg(model)
        .arg("--out")
        .arg(out);
    c
}

/// A fine-tuning short enough for a test: one epoch of 64 examples of 32 tokens.
pub const SHORT_FINETUNE: [&str; 6] = [
    "--epochs",
    "1",
    "--max-train-examples",
    "64",
    "--max-seq-len",
    "32",
];

pub fn pretrain_cmd(run: &Path, extra: &[&str]) -> Command {
    let mut c = bin();
    c.args(["pretrain", "--config", "tiny", "--run"]).arg(run);
    c.arg("--set")
        .arg(format!("data.shards={}", shards().display()));
    for s in [
        "train.steps=12",
        "train.checkpoint_every=3",
        "train.keep_checkpoints=10",
        "train.log_every=1",
        "data.batch_size=8",
        "optimizer.warmup_steps=4",
    ] {
        c.args(["--set", s]);
    }
    for s in extra {
        c.args(["--set", s]);
    }
    c
}

// Tensors for the kernel tests: random values, leaves, host copies, and a comparison.

/// `shape`'s element count of values uniform in [−2, 2), from `seed`.
pub fn random(shape: &[usize], seed: u64) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect()
}

/// A tensor that tracks its gradient.
pub fn leaf<const D: usize>(values: Vec<f32>, shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::<D>::from_data(TensorData::new(values, shape), device).require_grad()
}

/// The values of `t` as f32.
pub fn vec_of<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_into_vec().unwrap()
}

/// `a` and `b` within `tol` of each other, relative to `max(|a|, 1)`.
pub fn close_to(a: f64, b: f64, tol: f64, what: &str) {
    assert!(
        (a - b).abs() <= tol * a.abs().max(1.0),
        "{what}: {a} vs {b}"
    );
}

/// Every element within `tol` of `want`, relative to `1 + |want|`; a NaN fails.
pub fn assert_close(name: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / (1.0 + w.abs()))
        // A NaN counts as the worst difference (`f32::max` would pass over it).
        .fold(0f32, |worst, d| {
            if d.is_nan() {
                f32::INFINITY
            } else {
                worst.max(d)
            }
        });
    assert!(worst < tol, "{name}: worst relative difference {worst}");
}

/// A TCP port free on this host at the time of asking (for a test's rendezvous store).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `work` on a rayon pool of its own with `threads` threads.
pub fn on_threads<R: Send>(threads: usize, work: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(work)
}

/// The names in the folder `dir`, sorted (hidden ones too).
pub fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// Every `.rs` file under `dir`, sorted (the structure tests read `src/` with it).
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}

/// The text without `//` comments (a `//` inside a string literal is rare enough in `src/`
/// for a line-based cut; a string's `//` only hides identifiers after it).
pub fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `word` occurs in `code` as a whole identifier (or path, for `x::`).
pub fn mentions(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(i, _)| {
        let before = code[..i].chars().next_back().is_none_or(|c| !is_ident(c));
        let after = code[i + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !is_ident(c))
            || word.ends_with("::");
        before && after
    })
}
