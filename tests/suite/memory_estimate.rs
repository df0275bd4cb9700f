//! One memory estimate before any allocation: a model or a batch that cannot fit is refused in
//! one line with the figures and the remedy, under every limit that applies (here the
//! process's own address-space limit, set with `prlimit`), and leaves nothing behind.

use crate::common;
use common::{bin, data, fails};

use std::path::Path;
use std::process::Command;

/// `trueneg` under an address-space limit of `bytes`.
fn limited(bytes: u64) -> Command {
    let mut c = Command::new("prlimit");
    c.arg(format!("--as={bytes}"))
        .arg(env!("CARGO_BIN_EXE_trueneg"))
        .arg("--quiet");
    c
}

/// The golden ELECTRA discriminator with `field` of its config.json set to `value`.
fn model_with(dir: &Path, field: &str, value: u64) -> std::path::PathBuf {
    let model = common::transformers_folder(dir, "electra_discriminator");
    let path = model.join("config.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    c[field] = value.into();
    std::fs::write(&path, serde_json::to_string(&c).unwrap()).unwrap();
    model
}

#[test]
fn a_model_too_large_for_memory_is_refused_from_its_config() {
    for (field, value) in [
        ("hidden_size", 1_000_000_000),
        ("num_hidden_layers", 1_000_000),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let model = model_with(dir.path(), field, value);
        let out = dir.path().join("ft");
        let mut c = bin();
        c.args(["finetune", "--task", "rte", "--data"])
            .arg(data("glue/RTE"))
            .arg("--model")
            .arg(&model)
            .arg("--out")
            .arg(&out);
        let e = fails(c.output().unwrap());
        assert!(
            e.contains("config.json") && e.contains(field) && e.contains("of memory"),
            "{e}"
        );
        assert!(!out.exists(), "nothing written: {e}");
    }
}

#[test]
fn a_batch_too_large_for_the_address_space_limit_is_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::transformers_folder(dir.path(), "electra_discriminator");
    let out = dir.path().join("ft");
    let mut c = limited(4_000_000_000);
    c.args(["finetune", "--task", "sst2", "--data"])
        .arg(data("glue/SST-2"))
        .arg("--model")
        .arg(&model)
        .arg("--out")
        .arg(&out)
        .args(["--batch-size", "65536", "--max-seq-len", "32"]);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("--batch-size") && e.contains("address-space limit"),
        "{e}"
    );
    assert!(!out.exists(), "nothing written: {e}");
    // Pre-training's estimate answers to the same limit.
    let mut c = limited(4_000_000_000);
    c.args(["pretrain", "--config", "tiny", "--run"])
        .arg(dir.path().join("run"))
        .arg("--set")
        .arg(format!("data.shards={}", common::shards().display()))
        .args(["--set", "data.batch_size=200000"]);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("data.batch_size") && e.contains("address-space limit"),
        "{e}"
    );
}

#[test]
fn a_task_file_too_large_for_memory_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::transformers_folder(dir.path(), "electra_discriminator");
    // RTE's training rows repeated to 60 MB, its dev file as it is.
    let data_dir = dir.path().join("RTE");
    std::fs::create_dir_all(&data_dir).unwrap();
    let train = std::fs::read_to_string(data("glue/RTE/train.tsv")).unwrap();
    let (header, rows) = train.split_once('\n').unwrap();
    let mut big = String::from(header);
    let mut id = 0;
    while big.len() < 60_000_000 {
        for row in rows.lines().filter(|r| !r.is_empty()) {
            let (_, rest) = row.split_once('\t').unwrap();
            big += &format!("\n{id}\t{rest}");
            id += 1;
        }
    }
    std::fs::write(data_dir.join("train.tsv"), big + "\n").unwrap();
    std::fs::copy(data("glue/RTE/dev.tsv"), data_dir.join("dev.tsv")).unwrap();
    let out = dir.path().join("ft");
    // Held whole, the file's rows need about 0.35 GiB; the limit leaves less than that.
    let mut c = limited(600_000_000);
    c.args(["finetune", "--task", "rte", "--data"])
        .arg(&data_dir)
        .arg("--model")
        .arg(&model)
        .arg("--out")
        .arg(&out)
        .args([
            "--max-train-examples",
            "8",
            "--epochs",
            "1",
            "--max-seq-len",
            "32",
        ]);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("train.tsv") && e.contains("of memory") && e.contains("address-space limit"),
        "{e}"
    );
    assert!(!out.exists(), "nothing written: {e}");
}

#[test]
fn a_bench_too_large_for_memory_is_refused_before_its_models_are_built() {
    let mut c = limited(4_000_000_000);
    c.args([
        "bench", "--layers", "4", "--batch", "100000", "--steps", "1",
    ]);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("--batch") && e.contains("of memory") && e.contains("address-space limit"),
        "{e}"
    );
}

#[test]
fn statistics_too_large_for_memory_are_refused_before_a_model_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let mut c = limited(4_000_000_000);
    c.args(["stats", "--checkpoints"])
        .arg(&run)
        .arg("--corpus")
        .arg(data("wikitext-2/wiki.test.raw"))
        .args(["--batch-size", "3000000", "--batches", "1"]);
    let e = fails(c.output().unwrap());
    assert!(
        e.contains("--batch-size") && e.contains("of memory") && e.contains("address-space limit"),
        "{e}"
    );
    assert!(!run.join("correction-stats.md").exists(), "nothing written");
}

#[test]
fn a_dev_file_larger_than_memory_allows_is_evaluated_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::transformers_folder(dir.path(), "electra_discriminator");
    let ft = dir.path().join("ft");
    common::ok(
        Command::new(env!("CARGO_BIN_EXE_trueneg"))
            .args(["--quiet", "finetune", "--task", "sst2", "--data"])
            .arg(data("glue/SST-2"))
            .arg("--model")
            .arg(&model)
            .arg("--out")
            .arg(&ft)
            .args(["--epochs", "1", "--max-train-examples", "8"])
            .args(["--max-seq-len", "16"])
            .output()
            .unwrap(),
    );
    // SST-2's dev sentences, each made 2 kB long, repeated to 60 MB: held whole, its rows
    // would need about 0.35 GiB, more than the limit leaves.
    let dev = std::fs::read_to_string(data("glue/SST-2/dev.tsv")).unwrap();
    let rows: Vec<(String, &str)> = dev
        .lines()
        .skip(1)
        .map(|l| {
            let (s, label) = l.rsplit_once('\t').unwrap();
            (s.trim().repeat(2000 / s.len().max(1) + 1), label)
        })
        .collect();
    let mut big = String::from("sentence\tlabel\n");
    let mut n = 0usize;
    while big.len() < 60_000_000 {
        let (s, label) = &rows[n % rows.len()];
        big += &format!("{s}\t{label}\n");
        n += 1;
    }
    let file = dir.path().join("dev-large.tsv");
    std::fs::write(&file, big).unwrap();
    let out = dir.path().join("eval");
    let mut c = limited(600_000_000);
    c.args(["evaluate", "--model"])
        .arg(ft.join("seed-1"))
        .arg("--data")
        .arg(&file)
        .arg("--out")
        .arg(&out);
    let stdout = common::ok(c.output().unwrap());
    assert!(stdout.contains("accuracy"), "{stdout}");
    // GLUE's submission layout: a header, then rows 0 … N − 1 in file order.
    let tsv = std::fs::read_to_string(out.join("SST-2.tsv")).unwrap();
    let lines: Vec<&str> = tsv.lines().collect();
    assert_eq!(lines.len(), n + 1);
    assert_eq!(lines[0], "index\tprediction");
    assert!(lines[1].starts_with("0\t") && lines[n].starts_with(&format!("{}\t", n - 1)));
}

#[test]
fn a_vectors_file_larger_than_memory_allows_is_streamed_keeping_the_vocabulary_rows() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::transformers_folder(dir.path(), "electra_discriminator");
    // A GloVe file of 250 MB: vectors for the vocabulary's words w5 … w99 first, then rows of
    // words the vocabulary does not hold. Held whole (and copied), it would not fit the limit.
    let dim = 50;
    let row = |word: &str, seed: usize| {
        let v: Vec<String> = (0..dim)
            .map(|j| format!("{:.4}", ((seed * 31 + j * 7) % 97) as f32 / 97.0 - 0.5))
            .collect();
        format!("{word} {}\n", v.join(" "))
    };
    let mut glove = String::new();
    for i in 5..100 {
        glove += &row(&format!("w{i}"), i);
    }
    let filler = row("filler", 1);
    let mut file =
        std::io::BufWriter::new(std::fs::File::create(dir.path().join("g.txt")).unwrap());
    use std::io::Write;
    file.write_all(glove.as_bytes()).unwrap();
    let mut written = glove.len();
    while written < 250_000_000 {
        file.write_all(filler.as_bytes()).unwrap();
        written += filler.len();
    }
    drop(file);
    let out = dir.path().join("table.lex");
    let mut c = limited(500_000_000);
    c.args(["lexicon", "build", "--tokenizer"])
        .arg(model.join("vocab.txt"))
        .arg("--embeddings")
        .arg(dir.path().join("g.txt"))
        .arg("--out")
        .arg(&out);
    let stdout = common::ok(c.output().unwrap());
    assert!(stdout.contains("have synonyms"), "{stdout}");
    assert!(out.exists());
}

/// The estimate is monotonic across a sweep of address-space limits: each command runs or
/// refuses in one line, never aborts on a failed allocation, and once it runs at a limit it
/// runs at every higher one (R37: a SQuAD fine-tuning ran at 0.9 GB, was refused at 1.1 and
/// 1.3, and ran at 1.5, because the allocator reserves more address space where it may).
#[test]
fn every_command_runs_or_refuses_monotonically_across_address_space_limits() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny_shared();
    let text = dir.path().join("small.txt");
    let wiki = std::fs::read_to_string(data("wikitext-2/wiki.valid.tokens")).unwrap();
    std::fs::write(
        &text,
        wiki.lines().take(2000).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    let commands: Vec<(&str, Vec<String>)> = vec![
        (
            "finetune squad",
            [
                "finetune",
                "--task",
                "squad",
                "--model",
                &run.display().to_string(),
                "--data",
                &data("squad-v1.1/dev-half-a.json").display().to_string(),
                "--max-train-examples",
                "64",
                "--max-eval-examples",
                "32",
                "--epochs",
                "1",
                "--batch-size",
                "64",
                "--out",
            ]
            .map(String::from)
            .to_vec(),
        ),
        (
            "pretrain",
            [
                "pretrain",
                "--config",
                "tiny",
                "--set",
                &format!("data.shards={}", common::shards().display()),
                "--set",
                "train.steps=2",
                "--run",
            ]
            .map(String::from)
            .to_vec(),
        ),
        (
            "prepare",
            [
                "prepare",
                "--input",
                &text.display().to_string(),
                "--train-vocab",
                "500",
                "--out",
            ]
            .map(String::from)
            .to_vec(),
        ),
    ];
    for (name, args) in commands {
        let mut ran_at = None;
        for mib in [400u64, 600, 800, 1000, 1300, 1600] {
            let out = dir.path().join(format!("{}-{mib}", name.replace(' ', "-")));
            let o = limited(mib << 20).args(&args).arg(&out).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            let what = format!("{name} under {mib} MiB: {err}");
            assert!(matches!(o.status.code(), Some(0 | 1)), "{what}");
            assert!(!err.contains("memory allocation"), "{what}");
            if o.status.success() {
                ran_at.get_or_insert(mib);
            } else {
                assert!(
                    ran_at.is_none(),
                    "refused after running at {ran_at:?}: {what}"
                );
                assert!(err.contains("needs at least"), "{what}");
            }
        }
        assert!(ran_at.is_some(), "{name} ran at no limit up to 1600 MiB");
    }
}

/// R30: a JSONL document's paragraphs come in pieces of at most 1 MiB, cut at white space, as a
/// text file's long lines do, so that tokenising one stays bounded whatever its length.
#[test]
fn a_long_jsonl_paragraph_is_read_in_bounded_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let words = "synonym antonym ".repeat(200_000);
    let path = dir.path().join("one.jsonl");
    std::fs::write(
        &path,
        serde_json::json!({ "text": format!("{words}\n{words}") }).to_string() + "\n",
    )
    .unwrap();
    let mut reader = trueneg::text::corpus::CorpusReader::open(&path).unwrap();
    let paragraphs = reader.next_batch(1 << 30).unwrap();
    let total: usize = paragraphs.iter().map(|p| p.text.len() + 1).sum();
    assert!(paragraphs.len() >= 8, "{} pieces", paragraphs.len());
    assert!(
        paragraphs
            .iter()
            .all(|p| p.text.len() <= 1 << 20 && p.doc == 0)
    );
    assert!(
        paragraphs
            .iter()
            .all(|p| p.text.ends_with("synonym") || p.text.ends_with("antonym"))
    );
    assert!(total >= 2 * words.trim().len());
}

/// R33: counting the words of a corpus of more distinct words than the counts keep drops the
/// rarest, keeping memory bounded, and says how many it dropped.
#[test]
fn vocabulary_counts_stay_bounded_on_distinct_words() {
    use trueneg::text::vocab::MAX_WORDS;
    let mut counts = trueneg::text::WordPieceTokenizer::word_counts();
    let mut next = 0u64;
    for _ in 0..3 {
        let texts: Vec<String> = (0..MAX_WORDS / 2)
            .map(|_| {
                next += 1;
                format!("w{next:x} common")
            })
            .collect();
        counts.add(&texts).unwrap();
    }
    assert!(counts.dropped() > 0);
    let kept = counts.sorted();
    assert!(kept.len() <= MAX_WORDS, "{}", kept.len());
    assert!(
        kept.iter()
            .any(|(w, c)| w == "common" && *c == 3 * MAX_WORDS as u64 / 2)
    );
}

/// R32: `inspect` (and `stats`) read only the text their batches need: on a 200 MB corpus
/// under a 1 GB address-space limit, where reading it whole took 1.1 GB and aborted.
#[test]
fn inspect_reads_only_what_it_samples_of_a_large_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::pretrained_tiny(dir.path());
    let text = std::fs::read_to_string(data("wikitext-2/wiki.valid.tokens")).unwrap();
    let corpus = dir.path().join("big.txt");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&corpus).unwrap());
    let mut written = 0;
    while written < 200_000_000 {
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        written += text.len();
    }
    drop(file);
    let out = limited(1_000_000_000)
        .args(["inspect", "--run"])
        .arg(&run)
        .arg("--corpus")
        .arg(&corpus)
        .args(["--batches", "1", "--batch-size", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
