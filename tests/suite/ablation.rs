//! `trueneg ablation` end to end at tiny scale on the shared data: runs of one seed are paired
//! (same initial weights, data and masks), the report's numbers are the runs' own (recomputed
//! here from the stage files), an experiment killed part-way continues to the same report as
//! an uninterrupted one without redoing finished stages, and bad settings are refused.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{bin, data, fails, ok, shards};
use trueneg::experiments::ablation::{AblationOptions, AblationSpec, ablation};
use trueneg::experiments::ablation_report::AblationReport;
use trueneg::experiments::bootstrap::{bootstrap_grid, paired_difference};
use trueneg::finetune::seeds::TaskResult;
use trueneg::objective::ObjectiveKind;
use trueneg::tasks::glue::GlueTask;
use trueneg::train::pretrain::Progress;

const SETS: [&str; 4] = [
    "train.steps=12",
    "train.log_every=1",
    "data.batch_size=8",
    "optimizer.warmup_steps=2",
];

fn spec() -> AblationSpec {
    let mut overrides: Vec<String> = SETS.iter().map(|s| s.to_string()).collect();
    overrides.push(format!("data.shards={}", shards().display()));
    AblationSpec {
        recipe: Default::default(),
        config: "tiny".into(),
        overrides,
        objectives: vec![
            ObjectiveKind::BASELINE,
            ObjectiveKind::parse("hc").unwrap(),
            ObjectiveKind::parse("sr").unwrap(),
        ],
        pretrain_seeds: vec![1, 2],
        device: None,
        checkpoints: 3,
        glue: Some(data("glue")),
        tasks: vec![GlueTask::named("rte"), GlueTask::named("mrpc")],
        finetune_seeds: vec![1, 2],
        epochs: Some(1),
        lr: Some(2e-3),
        max_seq_len: Some(64),
        max_train_examples: 48,
        squad: Some(data("squad-v1.1/dev-half-a.json")),
        squad_train: 24,
        squad_eval: 12,
        squad_epochs: Some(1),
        squad_max_seq_len: Some(64),
        attack_seed: 1,
        stats_corpus: Some(data("wikitext-2/wiki.test.raw")),
        stats_batches: 2,
    }
}

/// The same experiment as [`spec`] on the command line (with other fine-tuning seeds if asked).
fn command(out: &Path) -> Command {
    command_with(out, "1,2")
}

fn command_with(out: &Path, finetune_seeds: &str) -> Command {
    let s = spec();
    let mut c = bin();
    c.args(["ablation", "--config", "tiny"]);
    for o in &s.overrides {
        c.args(["--set", o]);
    }
    c.args([
        "--objectives",
        "baseline,hc,sr",
        "--pretrain-seeds",
        "1,2",
        "--checkpoints",
        "3",
        "--tasks",
        "rte,mrpc",
        "--finetune-seeds",
        finetune_seeds,
        "--epochs",
        "1",
        "--lr",
        "2e-3",
        "--max-seq-len",
        "64",
        "--max-train-examples",
        "48",
        "--squad-train",
        "24",
        "--squad-eval",
        "12",
        "--squad-epochs",
        "1",
        "--squad-max-seq-len",
        "64",
        "--stats-batches",
        "2",
    ]);
    c.arg("--glue").arg(data("glue"));
    c.arg("--squad").arg(data("squad-v1.1/dev-half-a.json"));
    c.arg("--stats-corpus")
        .arg(data("wikitext-2/wiki.test.raw"));
    c.arg("--out").arg(out);
    c
}

fn read<T: serde::de::DeserializeOwned>(p: &Path) -> T {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn first_metrics(run: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// Every logged loss of a run (timings left out).
fn losses(run: &Path) -> Vec<(f64, f64, f64)> {
    common::metrics(run)
        .iter()
        .map(|m| (m.loss, m.mlm_loss(), m.value("disc_loss").unwrap_or(-1.0)))
        .collect()
}

/// The grid (pre-training seed × fine-tuning seed) of a task's scores from the stage files.
fn task_grid(out: &Path, objective: &str, task: &str) -> Vec<Vec<f64>> {
    [1, 2]
        .iter()
        .map(|s| {
            let r: TaskResult = read(
                &out.join("finetune")
                    .join(format!("{objective}-seed{s}"))
                    .join(task)
                    .join("results.json"),
            );
            r.per_seed.iter().map(|x| x.score).collect()
        })
        .collect()
}

fn cell<'a>(
    r: &'a [trueneg::experiments::ablation_report::Measured],
    o: &str,
    m: &str,
) -> &'a trueneg::experiments::ablation_report::Cell {
    &r.iter()
        .find(|x| x.objective == o && x.measure == m)
        .unwrap_or_else(|| panic!("{o} {m} in the report"))
        .cell
}

/// Numbers of two reports agree (runs are deterministic; a tolerance for float printing).
fn same_numbers(a: &AblationReport, b: &AblationReport) {
    assert_eq!(a.scores.len(), b.scores.len());
    for (x, y) in a
        .scores
        .iter()
        .chain(&a.differences)
        .zip(b.scores.iter().chain(&b.differences))
    {
        assert_eq!((&x.objective, &x.measure), (&y.objective, &y.measure));
        for (p, q) in [
            (x.cell.summary.mean, y.cell.summary.mean),
            (x.cell.interval.low, y.cell.interval.low),
            (x.cell.interval.high, y.cell.interval.high),
        ] {
            assert!(
                (p - q).abs() < 1e-9 || (p.is_nan() && q.is_nan()),
                "{} {}: {p} vs {q}",
                x.objective,
                x.measure
            );
        }
    }
}

#[test]
fn ablation_end_to_end_resume_and_refusals() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");

    // --- One uninterrupted experiment, in process.
    let (report, md) = trueneg::frame::in_folder("ablation", &whole, |out| {
        ablation(&AblationOptions {
            spec: spec(),
            out: out.clone(),
            keep_models: false,
            progress: Progress::Hidden,
        })
    })
    .unwrap();

    // Pairing: one seed's runs start alike (same weights, batch, masks, generator draws), so the
    // first step's losses agree where the objective does not change them; seeds differ.
    let run = |o: &str, s: u64| whole.join("pretrain").join(format!("{o}-seed{s}"));
    let b1 = first_metrics(&run("baseline", 1));
    let sr1 = first_metrics(&run("sr", 1));
    let hc1 = first_metrics(&run("hc", 1));
    assert_eq!(
        b1["mlm_loss"], sr1["mlm_loss"],
        "SR leaves the MLM term of step 1"
    );
    assert_eq!(b1["disc_loss"], sr1["disc_loss"]);
    assert_eq!(
        b1["disc_loss"], hc1["disc_loss"],
        "HC leaves the discriminator of step 1"
    );
    assert!(sr1["sr_loss"].as_f64().unwrap() > 0.0);
    let b2 = first_metrics(&run("baseline", 2));
    assert_ne!(
        b1["mlm_loss"], b2["mlm_loss"],
        "another seed, another start"
    );

    // The report's cells are the stage files' numbers.
    for task in ["RTE", "MRPC"] {
        let g = task_grid(&whole, "baseline", task);
        let c = cell(&report.scores, "baseline", task);
        let flat: Vec<f64> = g.iter().flatten().copied().collect();
        let mean = flat.iter().sum::<f64>() / flat.len() as f64;
        assert!((c.summary.mean - mean).abs() < 1e-12);
        assert_eq!(c.interval, bootstrap_grid(&g, 10_000, 0.95, 1));
        assert!(c.interval.low <= c.interval.mean && c.interval.mean <= c.interval.high);
        let h = task_grid(&whole, "hc", task);
        let d = cell(&report.differences, "hc", task);
        assert_eq!(d.interval, paired_difference(&h, &g, 10_000, 0.95, 1));
    }
    // The GLUE average per (pre-training, fine-tuning) seed, then over seeds.
    let (r, m) = (
        task_grid(&whole, "sr", "RTE"),
        task_grid(&whole, "sr", "MRPC"),
    );
    let avg: Vec<Vec<f64>> = r
        .iter()
        .zip(&m)
        .map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x + y) / 2.0).collect())
        .collect();
    assert_eq!(
        cell(&report.scores, "sr", "GLUE avg").interval,
        bootstrap_grid(&avg, 10_000, 0.95, 1)
    );

    // SQuAD: the drop is original EM − attacked EM, per fine-tuned model.
    let sq: trueneg::experiments::ablation::SquadRobustness =
        read(&whole.join("squad/hc-seed2/robustness.json"));
    assert_eq!(sq.attacks.len(), 2);
    assert_eq!(sq.ori.per_seed.len(), 2);
    let ori_em = cell(&report.scores, "hc", "SQuAD EM").summary.mean;
    let trans = cell(&report.scores, "hc", "SwapSynWordNet EM").summary.mean;
    let drop = cell(&report.scores, "hc", "SwapSynWordNet EM drop")
        .summary
        .mean;
    assert!((ori_em - trans - drop).abs() < 1e-9);
    assert!(
        whole
            .join("squad/hc-seed2/seed-1/predictions-AddSentDiverse.json")
            .exists()
    );
    assert!(
        !whole
            .join("squad/hc-seed2/seed-1/model.safetensors")
            .exists(),
        "weights go unless --keep-models"
    );

    // Table 8: every checkpoint of each HC run (12 steps, 3 checkpoints: 4, 8, 12).
    let stats: Vec<trueneg::train::stats::CheckpointStats> =
        read(&whole.join("stats/hc-seed1.json"));
    assert_eq!(
        stats.iter().map(|s| s.step).collect::<Vec<_>>(),
        vec![4, 8, 12]
    );
    assert!(stats.iter().all(|s| s.counts.masked > 0));
    assert_eq!(report.rates.len(), 3);
    assert!(!whole.join("stats/baseline-seed1.json").exists());

    // The Markdown says how many intervals contain 0, and the figures are there.
    let zero = report
        .differences
        .iter()
        .filter(|d| d.cell.interval.contains_zero())
        .count();
    assert_eq!(report.differences.len(), 2 * (2 + 1 + 2 + 4));
    assert!(md.contains(&format!(
        "{zero} of {} paired differences",
        report.differences.len()
    )));
    // The paper's GLUE average covers the 8 GLUE tasks and its SQuAD figures the whole dev
    // set: this small ablation computes neither so, and shows no paper row beside them.
    assert!(!md.contains("| paper: baseline |"), "{md}");
    assert!(report.paper.iter().all(|p| p.measure.ends_with(" %")));
    let mut full = report.spec.clone();
    full.tasks = trueneg::tasks::glue::GlueTask::glue();
    (full.max_train_examples, full.squad_train, full.squad_eval) = (0, 0, 0);
    let shown = trueneg::experiments::ablation_report::comparable_paper_numbers(&full);
    assert!(shown.iter().any(|p| p.measure == "GLUE avg"));
    assert!(shown.iter().any(|p| p.measure == "SQuAD EM"));
    for png in ["scores.png", "differences.png", "correction-rates.png"] {
        // A PNG (drawn with or without a font on the machine).
        let bytes = std::fs::read(whole.join(png)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 100, "{png}");
    }

    // --- The same experiment from the command line, killed once its first fine-tuning is
    // written, then continued.
    let killed = tmp.path().join("killed");
    let marker = killed.join("finetune/baseline-seed1/RTE/results.json");
    let mut child = command(&killed).spawn().unwrap();
    let start = Instant::now();
    while !marker.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before the kill"
        );
        assert!(start.elapsed() < Duration::from_secs(300));
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!killed.join("report.md").exists());
    let kept = std::fs::metadata(&marker).unwrap().modified().unwrap();
    let kept_metrics = losses(&run("baseline", 1));
    ok(command(&killed).output().unwrap());
    assert_eq!(
        std::fs::metadata(&marker).unwrap().modified().unwrap(),
        kept,
        "a finished fine-tuning is reused, not redone"
    );
    assert_eq!(
        losses(&killed.join("pretrain/baseline-seed1")),
        kept_metrics,
        "the killed experiment's first run equals the uninterrupted one's"
    );
    let continued: AblationReport = read(&killed.join("report.json"));
    same_numbers(&report, &continued);

    // A finished experiment runs again in no time and changes nothing.
    let report_md = std::fs::read(killed.join("report.md")).unwrap();
    ok(command(&killed).output().unwrap());
    assert_eq!(std::fs::read(killed.join("report.md")).unwrap(), report_md);

    // Other settings in the same folder are refused, naming what differs.
    let err = fails(command_with(&killed, "1").output().unwrap());
    assert!(err.contains("finetune_seeds"), "{err}");
}

#[test]
fn ablation_refuses_bad_settings_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let check = |f: &dyn Fn(&mut AblationSpec), expect: &str| {
        let mut s = spec();
        f(&mut s);
        let err = trueneg::frame::in_folder("ablation", &out, |claimed| {
            ablation(&AblationOptions {
                spec: s,
                out: claimed.clone(),
                keep_models: false,
                progress: Progress::Hidden,
            })
        })
        .err()
        .unwrap_or_else(|| panic!("should fail: {expect}"))
        .to_string();
        assert!(err.contains(expect), "{err} should name {expect}");
        assert!(!out.exists(), "nothing written for {expect}");
    };
    check(
        &|s| s.objectives = vec![ObjectiveKind::parse("hc").unwrap()],
        "baseline",
    );
    check(
        &|s| s.objectives.push(ObjectiveKind::parse("cline").unwrap()),
        "compare-continued",
    );
    check(&|s| s.pretrain_seeds = vec![1, 1], "--pretrain-seeds");
    check(&|s| s.finetune_seeds.clear(), "--finetune-seeds");
    check(&|s| s.glue = None, "--glue");
    check(
        &|s| s.glue = Some(PathBuf::from("/nonexistent/glue")),
        "/nonexistent/glue/RTE/train.tsv",
    );
    check(
        &|s| s.overrides.push("train.seed=3".into()),
        "--set train.seed=3",
    );
    check(&|s| s.lr = Some(-1.0), "--lr");
    check(
        &|s| s.tasks = vec![GlueTask::named("cad-sentiment")],
        "not a GLUE task",
    );

    // The command line: an unknown objective, an unknown task.
    for (flag, value, expect) in [
        ("--objectives", "baseline,xx", "--objectives xx"),
        ("--tasks", "cola,nope", "nope"),
    ] {
        let mut c = bin();
        c.args(["ablation", "--config", "tiny", flag, value, "--out"])
            .arg(&out);
        let err = fails(c.output().unwrap());
        assert!(err.contains(expect), "{err}");
    }
    assert!(!out.exists());
}

/// The spec's learning rate is the one every fine-tuning of the ablation uses, GLUE and SQuAD:
/// ELECTRA's choice by the encoder's size does not overwrite it.
#[test]
fn the_ablations_learning_rate_reaches_every_fine_tuning() {
    let s = spec();
    let small = trueneg::model::EncoderConfig::default();
    for task in &s.tasks {
        let (o, note) = s.glue_options(*task).for_encoder(&small);
        assert_eq!((o.lr, note), (2e-3, None), "{task:?}");
    }
    let (o, note) = s.squad_options(512).for_encoder(&small);
    assert_eq!((o.lr, note), (2e-3, None));
    // Without one, ELECTRA's rate for a Small encoder.
    let none = AblationSpec { lr: None, ..s };
    assert_eq!(none.squad_options(512).for_encoder(&small).0.lr, 3e-4);
}
