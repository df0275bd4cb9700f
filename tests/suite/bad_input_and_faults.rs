//! Bad input and faults: nothing lost, nothing silently wrong, no hang, no panic; each test
//! names the case it guards.

use crate::common;
use common::{
    bin, copy_files, data, fails, metrics, ok, other_tokenizer, pretrain_cmd, resume_cmd, shards,
};

use std::path::{Path, PathBuf};

/// a run whose checkpoints lost `optimizer.safetensors` resumes its weights (a warning,
/// fresh optimizer state); no step folder is deleted and `metrics.jsonl` keeps its lines.
#[test]
fn stripped_optimizer_state_resumes_the_weights_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(&run, &["train.steps=6"]).output().unwrap());
    let ck = run.join("checkpoints");
    let steps: Vec<PathBuf> = ["step-00000003", "step-00000006"]
        .iter()
        .map(|s| ck.join(s))
        .collect();
    for s in &steps {
        std::fs::remove_file(s.join("optimizer.safetensors")).unwrap();
    }
    // A user's own file in a step folder and a folder missing its state are left alone too.
    std::fs::create_dir_all(ck.join("step-00000099")).unwrap();
    std::fs::write(ck.join("step-00000099/notes.txt"), "mine").unwrap();
    let out = resume_cmd(&run)
        .args(["--set", "train.steps=9"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("no optimizer.safetensors"), "{stderr}");
    let m = metrics(&run);
    assert_eq!(
        m.iter().map(|x| x.step).collect::<Vec<_>>(),
        (1..=9).collect::<Vec<_>>()
    );
    for s in &steps {
        assert!(s.join("model.safetensors").exists(), "{}", s.display());
    }
    assert!(ck.join("step-00000099/notes.txt").exists());
}

/// a shard folder's tokenizer.json must be the manifest's; a missing one is named.
#[test]
fn a_swapped_or_missing_shard_tokenizer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("wiki");
    copy_files(shards(), &copy);
    std::fs::copy(other_tokenizer(), copy.join("tokenizer.json")).unwrap();
    let run = |name: &str| {
        let mut c = bin();
        c.args(["pretrain", "--config", "tiny", "--run"])
            .arg(dir.path().join(name))
            .arg("--set")
            .arg(format!("data.shards={}", copy.display()));
        fails(c.output().unwrap())
    };
    let e = run("a");
    assert!(
        e.contains("tokenizer.json") && e.contains("not the tokenizer"),
        "{e}"
    );
    std::fs::remove_file(copy.join("tokenizer.json")).unwrap();
    let e = run("b");
    assert!(e.contains("tokenizer.json: missing"), "{e}");
    assert!(!dir.path().join("a/checkpoints").exists());
}

fn glue_copy(dir: &Path, task: &str, dev: &str) -> PathBuf {
    let d = dir.join(task);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(data(&format!("glue/{task}/train.tsv")), d.join("train.tsv")).unwrap();
    std::fs::write(d.join("dev.tsv"), dev).unwrap();
    d
}

/// an empty dev set, a non-finite STS-B score, duplicate SQuAD ids and a SQuAD
/// question without answers are errors naming the file, not figures.
#[test]
fn scoring_refuses_what_would_give_a_meaningless_figure() {
    use trueneg::finetune::classify::read_task;
    use trueneg::tasks::glue::{GlueTask, read_glue};
    use trueneg::tasks::squad::read_squad;
    let dir = tempfile::tempdir().unwrap();
    // A dev file with a header and no row.
    let rte = glue_copy(dir.path(), "RTE", "index\tsentence1\tsentence2\tlabel\n");
    let e = read_task(GlueTask::named("rte"), &rte)
        .unwrap_err()
        .to_string();
    assert!(e.contains("dev.tsv") && e.contains("0 read"), "{e}");
    // STS-B: "nan" parses as a float; it is not a score.
    let header =
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n";
    let p = dir.path().join("sts.tsv");
    std::fs::write(
        &p,
        format!("{header}0\tg\tf\ty\t0\ts\ts\tA man.\tA person.\tnan\n"),
    )
    .unwrap();
    let e = read_glue(GlueTask::named("stsb"), &p)
        .unwrap_err()
        .to_string();
    assert!(e.contains("sts.tsv:2") && e.contains("finite"), "{e}");
    // SQuAD: two questions with one id; a question without answers.
    let squad = |qas: &str| {
        let p = dir.path().join("squad.json");
        std::fs::write(
            &p,
            format!(r#"{{"data": [{{"title": "t", "paragraphs": [{{"context": "Denver won.", "qas": [{qas}]}}]}}]}}"#),
        )
        .unwrap();
        read_squad(&p).unwrap_err().to_string()
    };
    let q = |id: &str| {
        format!(
            r#"{{"id": "{id}", "question": "Who won?", "answers": [{{"text": "Denver", "answer_start": 0}}]}}"#
        )
    };
    let e = squad(&format!("{}, {}", q("x1"), q("x1")));
    assert!(e.contains("question id x1") && e.contains("unique"), "{e}");
    let e = squad(r#"{"id": "x2", "question": "Who won?", "answers": []}"#);
    assert!(e.contains("x2") && e.contains("no answers"), "{e}");
}

/// a model whose predictions are not finite gets no score.
#[test]
fn a_non_finite_prediction_is_not_scored() {
    use trueneg::finetune::scores::score_file;
    use trueneg::tasks::glue::{GlueExample, GlueTask, Label};
    let ex = |id: &str, s: f64| GlueExample {
        id: id.into(),
        text_a: "a".into(),
        text_b: Some("b".into()),
        label: Some(Label::Score(s)),
    };
    let f = Path::new("dev.tsv");
    let examples = [ex("1", 1.0), ex("2", 2.0), ex("3", 3.0)];
    score_file(GlueTask::named("stsb"), f, &examples, &[1.0, 2.0, 3.0]).unwrap();
    let e = score_file(GlueTask::named("stsb"), f, &examples, &[1.0, f64::NAN, 3.0])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dev.tsv") && e.contains("example 2") && e.contains("NaN"),
        "{e}"
    );
    assert!(score_file(GlueTask::named("stsb"), f, &[], &[]).is_err());
}

/// counts of zero (and a 1-token window) are refused before any work.
#[test]
fn numeric_options_are_range_checked_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shards");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "prepare".into(),
                "--input".into(),
                data("wikitext-2/wiki.test.raw").display().to_string(),
                "--train-vocab".into(),
                "1000".into(),
                "--examples-per-shard".into(),
                "0".into(),
                "--out".into(),
                out.display().to_string(),
            ],
            "--examples-per-shard",
        ),
        (
            "stats --checkpoints x --corpus y --batch-size 0"
                .split(' ')
                .map(String::from)
                .collect(),
            "--batch-size",
        ),
        (
            "stats --checkpoints x --corpus y --batches 0"
                .split(' ')
                .map(String::from)
                .collect(),
            "--batches",
        ),
        (
            "hits --model x --sentences y --max-seq-len 1"
                .split(' ')
                .map(String::from)
                .collect(),
            "--max-seq-len",
        ),
        (
            "bench --steps 0".split(' ').map(String::from).collect(),
            "--steps",
        ),
    ];
    for (args, option) in cases {
        let out = bin().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(option) && e.contains("not in"), "{args:?}: {e}");
    }
    assert!(!out.exists(), "nothing written");
    // The library refuses the hang too.
    let o = trueneg::text::prepare::PrepareOptions {
        inputs: vec![data("wikitext-2/wiki.test.raw")],
        tokenizer: None,
        train_vocab: Some(1000),
        max_seq_len: 64,
        out: out.clone(),
        seed: 1,
        examples_per_shard: 0,
        show_progress: false,
        records: None,
        text_field: None,
    };
    let prepared = trueneg::frame::in_folder("prepare", &out, |claimed| {
        trueneg::text::prepare::prepare(&o, claimed)
    });
    assert!(prepared.is_err());
}

/// a vocab.txt with a repeated line is refused, naming the line.
#[test]
fn a_vocab_with_a_repeated_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("vocab.txt");
    std::fs::write(
        &p,
        "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nof\nthe\nand\n",
    )
    .unwrap();
    let e = trueneg::text::WordPieceTokenizer::load(&p)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("vocab.txt:8") && e.contains("repeats line 6"),
        "{e}"
    );
}

/// GLUE fine-tuning of a model with fewer positions than the recipe's length: the
/// default length fits the model; an explicit longer one is one line naming both figures.
#[test]
fn glue_fine_tuning_fits_the_models_positions() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    ok(pretrain_cmd(
        &run,
        &[
            "train.steps=3",
            "model.max_position_embeddings=64",
            "data.max_seq_len=64",
        ],
    )
    .output()
    .unwrap());
    let rte = data("glue/RTE");
    let ft = |extra: &[&str], out: &str| {
        let mut c = bin();
        c.args(["finetune", "--task", "rte", "--data"])
            .arg(&rte)
            .arg("--model")
            .arg(&run)
            .args(["--epochs", "1", "--max-train-examples", "16", "--out"])
            .arg(dir.path().join(out))
            .args(extra);
        c.output().unwrap()
    };
    let e = fails(ft(&["--max-seq-len", "128"], "a"));
    assert!(
        e.contains("--max-seq-len 128") && e.contains("64 positions"),
        "{e}"
    );
    ok(ft(&[], "b"));
}

/// `--resume` after the shards were prepared again from other text (same tokenizer)
/// is refused: the run records the corpus's content fingerprint.
#[test]
fn resuming_on_a_corpus_prepared_again_from_other_text_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    copy_files(shards(), &corpus);
    let run = dir.path().join("run");
    let mut c = bin();
    c.args(["pretrain", "--config", "tiny", "--run"])
        .arg(&run)
        .arg("--set")
        .arg(format!("data.shards={}", corpus.display()))
        .args(["--set", "train.steps=3", "--set", "data.batch_size=8"]);
    ok(c.output().unwrap());
    let before = std::fs::read(run.join("metrics.jsonl")).unwrap();
    // The same tokenizer on another text.
    let other = dir.path().join("other");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(shards().join("manifest.json")).unwrap()).unwrap();
    ok(bin()
        .args(["prepare", "--input"])
        .arg(data("wikitext-2/wiki.valid.tokens"))
        .arg("--tokenizer")
        .arg(shards().join("tokenizer.json"))
        .args([
            "--max-seq-len",
            &manifest["max_seq_len"].to_string(),
            "--out",
        ])
        .arg(&other)
        .output()
        .unwrap());
    // Another corpus in the same folder: its files replace the first one's.
    std::fs::remove_dir_all(&corpus).unwrap();
    copy_files(&other, &corpus);
    let e = fails(
        resume_cmd(&run)
            .args(["--set", "train.steps=6"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("changed since this run began"), "{e}");
    assert_eq!(
        std::fs::read(run.join("metrics.jsonl")).unwrap(),
        before,
        "nothing written"
    );
}

/// `model.init_from` of a model trained with another vocabulary of the same size is
/// refused (it was accepted: only the size was compared).
#[test]
fn init_from_a_model_of_another_tokenizer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    ok(pretrain_cmd(&base, &["train.steps=3"]).output().unwrap());
    // 2000 tokens as the base's, trained on another text.
    let other = dir.path().join("other");
    ok(bin()
        .args(["prepare", "--input"])
        .arg(data("wikitext-2/wiki.valid.tokens"))
        .args(["--train-vocab", "2000", "--max-seq-len", "64", "--out"])
        .arg(&other)
        .output()
        .unwrap());
    let run = dir.path().join("run");
    let mut c = bin();
    c.args(["pretrain", "--config", "tiny", "--run"])
        .arg(&run)
        .arg("--set")
        .arg(format!("data.shards={}", other.display()))
        .arg("--set")
        .arg(format!("model.init_from={}", base.display()))
        .args(["--set", "train.steps=2", "--set", "data.batch_size=8"]);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("model.init_from") && e.contains("another tokenizer"),
        "{e}"
    );
    assert!(!run.join("checkpoints").exists());
    // `lexicon build --checkpoint` of the base with the other tokenizer, likewise.
    let ck = base.join("checkpoints/step-00000003/model.safetensors");
    let lex = |tok: &Path, out: &str| {
        bin()
            .args(["lexicon", "build", "--tokenizer"])
            .arg(tok)
            .arg("--checkpoint")
            .arg(&ck)
            .arg("--out")
            .arg(dir.path().join(out))
            .output()
            .unwrap()
    };
    let e = fails(lex(&other.join("tokenizer.json"), "x.lex"));
    assert!(
        e.contains("--checkpoint") && e.contains("another tokenizer"),
        "{e}"
    );
    assert!(!dir.path().join("x.lex").exists());
    ok(lex(&base.join("tokenizer.json"), "y.lex"));
    // The same tokenizer is accepted.
    let same = dir.path().join("same");
    ok(pretrain_cmd(
        &same,
        &[
            "train.steps=2",
            &format!("model.init_from={}", base.display()),
        ],
    )
    .output()
    .unwrap());
}

/// a shard with flipped bytes is an error naming the shard file and the record (it
/// panicked inside the embedding gather).
#[test]
fn a_damaged_shard_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    copy_files(shards(), &corpus);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(corpus.join("manifest.json")).unwrap()).unwrap();
    let (len, tb) = (
        manifest["max_seq_len"].as_u64().unwrap() as usize,
        manifest["token_bytes"].as_u64().unwrap() as usize,
    );
    let rec = 4 + len * tb;
    let shard = corpus.join(manifest["shards"][0]["file"].as_str().unwrap());
    let mut bytes = std::fs::read(&shard).unwrap();
    // Every record's first token id becomes 0xFFFF…: past any vocabulary here.
    for r in bytes.chunks_mut(rec) {
        r[4..4 + tb].fill(0xFF);
    }
    std::fs::write(&shard, bytes).unwrap();
    let mut c = bin();
    c.args(["pretrain", "--config", "tiny", "--run"])
        .arg(dir.path().join("run"))
        .arg("--set")
        .arg(format!("data.shards={}", corpus.display()))
        .args(["--set", "train.steps=2", "--set", "data.batch_size=8"]);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains(shard.file_name().unwrap().to_str().unwrap())
            && e.contains("record")
            && e.contains("damaged"),
        "{e}"
    );
}

/// in a folder, corpus files are told by suffix in any case (`x.JSONL` is JSON lines);
/// a README or a binary is skipped with a note; what was read is listed. A binary named on its
/// own is an error naming it.
#[test]
fn corpus_folders_take_corpus_files_by_suffix_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(input.join("sub")).unwrap();
    let text = std::fs::read_to_string(data("wikitext-2/wiki.test.raw")).unwrap();
    let half = text.len() / 2;
    let cut = text[..half].rfind('\n').unwrap();
    std::fs::write(input.join("a.TXT"), &text[..cut]).unwrap();
    let jsonl: String = text[cut..]
        .split("\n\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| format!("{}\n", serde_json::json!({ "text": d })))
        .collect();
    std::fs::write(input.join("sub/b.JSONL"), jsonl).unwrap();
    std::fs::write(
        input.join("README.md"),
        "# My corpus\nDo not train on me.\n",
    )
    .unwrap();
    std::fs::write(input.join("weights.bin"), [0u8, 159, 146, 150, 0, 1, 2]).unwrap();
    let out = bin()
        .args(["prepare", "--input"])
        .arg(&input)
        .args(["--train-vocab", "1000", "--max-seq-len", "64", "--out"])
        .arg(dir.path().join("shards"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = ok(out);
    assert!(
        stdout.contains("read 2 files") && stdout.contains("b.JSONL"),
        "{stdout}"
    );
    for skipped in ["README.md", "weights.bin"] {
        assert!(
            stderr.contains(&format!("{skipped}: not a corpus file")),
            "{stderr}"
        );
    }
    // Named on its own, a binary file is refused, naming it.
    let e = fails(
        bin()
            .args(["prepare", "--input"])
            .arg(input.join("weights.bin"))
            .args(["--train-vocab", "1000", "--out"])
            .arg(dir.path().join("bin-shards"))
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("weights.bin") && e.contains("not a text file"),
        "{e}"
    );
}

/// a synonym table with damaged offsets or ids is refused when it is loaded (it
/// panicked about 100 steps into training).
#[test]
fn a_damaged_synonym_table_is_refused_at_load() {
    use safetensors::tensor::{Dtype, TensorView};
    use trueneg::text::SynonymTable;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, offsets: &[u32], ids: &[u32]| {
        let o: Vec<u8> = offsets.iter().flat_map(|v| v.to_le_bytes()).collect();
        let i: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
        let views = vec![
            (
                "offsets",
                TensorView::new(Dtype::U32, vec![offsets.len()], &o).unwrap(),
            ),
            (
                "ids",
                TensorView::new(Dtype::U32, vec![ids.len()], &i).unwrap(),
            ),
        ];
        let p = dir.path().join(name);
        std::fs::write(&p, safetensors::serialize(views, None).unwrap()).unwrap();
        p
    };
    // Three tokens: 0 ↔ 1, 2 alone.
    SynonymTable::load(&write("good.lex", &[0, 1, 2, 2], &[1, 0])).unwrap();
    let e = SynonymTable::load(&write("a.lex", &[0, 2, 1, 2], &[1, 0]))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("a.lex") && e.contains("offsets decrease"), "{e}");
    let e = SynonymTable::load(&write("b.lex", &[0, 1, 2, 2], &[1, 9]))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("b.lex") && e.contains("synonym id 9"), "{e}");
}

/// a TOML syntax error names the file, line and column, and nothing is written.
#[test]
fn a_toml_syntax_error_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mine.toml");
    std::fs::write(&cfg, "[model]\nkind = \"electra\"\nhidden_size = = 3\n").unwrap();
    let run = dir.path().join("run");
    let e = fails(
        bin()
            .args(["pretrain", "--config"])
            .arg(&cfg)
            .arg("--run")
            .arg(&run)
            .output()
            .unwrap(),
    );
    assert!(e.contains("mine.toml:3:15"), "{e}");
    assert!(!run.exists());
}

/// a transformers folder where a run is expected (`export`, `stats`) is named
/// as such (it said "no such config file or preset").
#[test]
fn a_transformers_folder_where_a_run_is_expected_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let hf = common::shared("golden/electra_discriminator");
    let e = fails(
        bin()
            .args(["export", "--run"])
            .arg(&hf)
            .arg("--out")
            .arg(dir.path().join("out"))
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("a transformers model folder") && e.contains("config.toml"),
        "{e}"
    );
    let e = fails(
        bin()
            .args(["stats", "--checkpoints"])
            .arg(&hf)
            .args(["--corpus", "x"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("a transformers model folder"), "{e}");
    let e = fails(
        bin()
            .args(["stats", "--checkpoints"])
            .arg(shards())
            .args(["--corpus", "x"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("a prepared corpus"), "{e}");
    assert!(!dir.path().join("out").exists());
}

/// a new run that fails before its first step (here: no WordNet for Hard
/// Correction) leaves no run files, so the plain retry starts; a folder holding the user's own
/// files is refused before anything is written, and kept with what was in it.
#[test]
fn a_run_that_failed_before_its_first_step_can_be_retried() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::create_dir_all(&users).unwrap();
    std::fs::write(users.join("notes.txt"), "mine").unwrap();
    let e = fails(pretrain_cmd(&users, &["train.steps=2"]).output().unwrap());
    assert!(e.contains("holds files that trueneg did not write"), "{e}");
    assert_eq!(common::names(&users), ["notes.txt"]);
    let run = dir.path().join("run");
    let e = fails(
        pretrain_cmd(&run, &["objective.kind=hc", "train.steps=2"])
            .env("WNHOME", dir.path().join("no-wordnet"))
            .output()
            .unwrap(),
    );
    assert!(e.contains("no-wordnet"), "{e}");
    for f in [
        "config.toml",
        "metrics.jsonl",
        "tokenizer.json",
        "trueneg-version.txt",
        "checkpoints",
    ] {
        assert!(!run.join(f).exists(), "{f} left behind");
    }
    // `--wordnet` names the database where WNHOME is wrong (a WordNet home or its dict/).
    let e = fails(
        pretrain_cmd(&run, &["objective.kind=hc", "train.steps=2"])
            .args(["--wordnet", "/nonexistent/wn"])
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("/nonexistent/wn: no such file or folder; --wordnet takes the WordNet database"),
        "{e}"
    );
    ok(pretrain_cmd(&run, &["objective.kind=hc", "train.steps=2"])
        .env("WNHOME", dir.path().join("no-wordnet"))
        .args(["--wordnet", "/usr/share/wordnet"])
        .output()
        .unwrap());
    assert!(run.join("config.toml").exists());
}
