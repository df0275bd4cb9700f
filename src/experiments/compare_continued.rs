//! A continued comparison: from one pre-trained run, continue pre-training with its own
//! objective on its own corpus (the baseline) and with another objective (on its own corpus
//! where it trains on other data, e.g. sentence triples), for the same number of steps and
//! each pre-training seed; fine-tune every model on the counterfactual sentiment task over the
//! fine-tuning seeds; score contrast consistency (Ori / Rev / Con) and Hits.
//!
//! Layout of `out`: `pretrain/<arm>-seed<s>/` (runs), `finetune/<arm>-seed<s>/` (fine-tuned
//! models per fine-tuning seed, `results.json`, each seed's `contrast.json`),
//! `hits/<arm>-seed<s>.json`, and `report.md` / `report.json`. Every stage whose output is
//! whole is reused, so a killed comparison continues where it stopped.
//!
//! Statistics: mean ± sample standard deviation over (pre-training seed × fine-tuning seed) for
//! the fine-tuned scores, over pre-training seeds for Hits; the objective − baseline difference
//! is paired on the same seeds, with a 95 % two-level bootstrap interval (10,000 draws, fixed seed;
//! [`super::bootstrap`]) and a plain word when it contains 0.

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::eval::evaluate::evaluate_contrast;
use crate::eval::hits::{HitsReport, Triplet, hits};
use crate::experiments::bootstrap::{Interval, describe_difference};
use crate::experiments::stages::Stages;
use crate::finetune::pretrained::load_pretrained;
use crate::finetune::recipe::FinetuneOptions;
use crate::finetune::seeds::{Summary, TaskResult, finetune_glue, summary, write_results};
use crate::objective::ObjectiveKind;
use crate::tasks::contrast::Consistency;
use crate::tasks::glue::GlueTask;
use crate::text::shards::{DataKind, ShardSet};
use crate::train::config::PretrainConfig;
use crate::train::pretrain::{Progress, RunOptions, pretrain};
use crate::train::run::{new_run, resume_run};
use crate::{Error, Result};

pub struct CompareOptions {
    /// The trueneg run both arms continue from (its config, data and latest checkpoint).
    pub base_run: PathBuf,
    /// The objective the compared arm continues with.
    pub objective: ObjectiveKind,
    /// The compared arm's corpus, made with the base run's tokenizer (`None`: the base run's).
    pub data: Option<PathBuf>,
    /// Steps of continued pre-training in each arm.
    pub steps: u64,
    /// `--set` overrides applied to both arms (e.g. `optimizer.lr=1e-4`).
    pub overrides: Vec<String>,
    pub pretrain_seeds: Vec<u64>,
    pub finetune_seeds: Vec<u64>,
    /// The cad-sentiment folder (`train.tsv`, `dev.tsv`).
    pub task_data: PathBuf,
    pub finetune: FinetuneOptions,
    /// The contrast set ([`crate::tasks::contrast::read_contrast_set`]) and its split.
    pub contrast: PathBuf,
    pub split: String,
    /// Hits triplets (already built from sentences).
    pub triplets: Vec<Triplet>,
    /// The comparison's folder, claimed by the command frame.
    pub out: crate::frame::Owned,
    pub progress: Progress,
}

/// The task the comparison fine-tunes on: counterfactually-augmented sentiment.
pub const SENTIMENT_TASK: &str = "cad-sentiment";

/// One arm's scores for one (pre-training seed, fine-tuning seed).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SeedScores {
    pub pretrain_seed: u64,
    pub finetune_seed: u64,
    pub dev_accuracy: f64,
    pub contrast: Consistency,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ArmReport {
    pub arm: String,
    pub runs: Vec<PathBuf>,
    pub scores: Vec<SeedScores>,
    pub hits: Vec<HitsReport>,
    pub dev_accuracy: Summary,
    pub ori: Summary,
    pub rev: Summary,
    pub con: Summary,
    pub hits_cls: Summary,
    pub hits_mean: Summary,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompareReport {
    pub base_run: PathBuf,
    pub steps: u64,
    pub contrast: PathBuf,
    pub arms: Vec<ArmReport>,
    /// The compared arm − baseline, paired by seeds: dev accuracy, Ori, Rev, Con, Hits `[CLS]`,
    /// Hits mean; mean ± sd and the 95 % two-level bootstrap interval ([`super::bootstrap`]).
    pub difference: Vec<(String, Summary, Interval)>,
}

/// The command's name in messages and its lock.
pub const COMMAND: &str = "compare-continued";

/// The arm that continues with the base run's own objective and corpus.
const BASELINE: &str = "baseline";

/// A named score read from one result.
type Measure<T> = (&'static str, fn(&T) -> f64);

/// Continues `base` for one arm and seed into `dir` (resuming what is there). The base run's
/// config with `train.steps`, the seed, one final checkpoint and the overrides; `log_every` is
/// cut to the steps, and a warmup as long as the run is cut to a tenth of it.
fn pretrain_arm(o: &CompareOptions, arm: &str, seed: u64, dir: &Path) -> Result<()> {
    let rel = dir.strip_prefix(o.out.dir()).unwrap_or(dir);
    let dir = &o.out.child(rel)?;
    let folder = if dir.dir().join("config.toml").is_present() {
        resume_run(dir, &[])?
    } else {
        let base_cfg = o.base_run.join("config.toml");
        let mut sets = vec![
            format!("model.init_from={}", o.base_run.display()),
            format!("train.steps={}", o.steps),
            format!("train.seed={seed}"),
            format!("train.checkpoint_every={}", o.steps),
            "train.keep_checkpoints=1".to_string(),
        ];
        if arm != BASELINE {
            sets.push(format!("objective.kind={arm}"));
            if let Some(data) = &o.data {
                sets.push(format!("data.shards={}", data.display()));
            }
        }
        sets.extend(o.overrides.iter().cloned());
        let mut cfg = PretrainConfig::load_file(&base_cfg, &sets)?;
        if cfg.train.log_every > o.steps {
            cfg.train.log_every = o.steps;
        }
        if cfg.optimizer.warmup_steps >= o.steps {
            cfg.optimizer.warmup_steps = o.steps / 10;
        }
        cfg.absolute_paths()?;
        cfg.validate(COMMAND)?;
        new_run(cfg, dir)?
    };
    let cfg = &folder.config;
    let shards_dir = cfg.data.shards.clone().ok_or_else(|| {
        Error::Config(format!(
            "{}: the base run has no data.shards (it used the embedded default corpus); prepare a corpus and pre-train on it",
            o.base_run.display()
        ))
    })?;
    let shards = ShardSet::open(&shards_dir)?;
    pretrain(
        cfg,
        &shards,
        &RunOptions {
            run_dir: dir.dir().to_path_buf(),
            resume: folder.resume,
            progress: o.progress,
            stop: Some(crate::stop::flag()),
        },
    )?;
    Ok(())
}

/// A stage's output when it is there and whole (else the stage runs again).
fn finished<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    crate::io::read_json(path).ok()
}

/// What the comparison reads, checked before anything is trained or written: the task data is
/// counterfactual sentiment (CAD-sentiment's `train.tsv` and `dev.tsv`, its labels), the arms
/// differ and train on the data they need ([`check_arms`]), and the contrast set's labels are
/// the task's.
fn check_inputs(o: &CompareOptions) -> Result<()> {
    let task = GlueTask::named(SENTIMENT_TASK);
    crate::finetune::classify::read_task(task, &o.task_data).map_err(|e| {
        Error::Input(format!(
            "--task-data {}: not a counterfactual sentiment folder (train.tsv and dev.tsv with Sentiment and Text): {e}",
            o.task_data.display()
        ))
    })?;
    check_arms(o)?;
    let (kind, _, _) = crate::tasks::contrast::read_contrast_set(&o.contrast, &o.split)?;
    if let Some(l) = kind.labels().iter().find(|l| !task.labels().contains(l)) {
        return Err(Error::Input(format!(
            "{}: its label {l:?} is not one of CAD-sentiment's ({})",
            o.contrast.display(),
            task.labels().join(", ")
        )));
    }
    Ok(())
}

/// The two arms differ and each trains on data of its kind: the base run trains on packed
/// examples (its continuation is the baseline), the compared objective is not the base run's
/// own on the same corpus, and its corpus (`data`, where given) holds the data it trains on,
/// made with the base run's tokenizer.
fn check_arms(o: &CompareOptions) -> Result<()> {
    if o.objective.name() == BASELINE {
        return Err(Error::Config(format!(
            "--objective {BASELINE}: the {BASELINE} arm is the base run's own objective; name the objective to compare with it"
        )));
    }
    let base = PretrainConfig::load_file(&o.base_run.join("config.toml"), &[])?;
    if base.objective.kind.data() != DataKind::Packed {
        return Err(Error::Config(format!(
            "{}: the base run trains on {}; start from a run on {}",
            o.base_run.display(),
            base.objective.kind.data().describe(),
            DataKind::Packed.describe()
        )));
    }
    let Some(data) = &o.data else {
        if o.objective.data() != DataKind::Packed {
            return Err(Error::Config(format!(
                "--objective {}: it trains on {}; give them with --data",
                o.objective.name(),
                o.objective.data().describe()
            )));
        }
        if o.objective == base.objective.kind {
            return Err(Error::Config(format!(
                "--objective {}: the base run trains with it on the same corpus, so both arms would be the same; choose another objective or give --data",
                o.objective.name()
            )));
        }
        return Ok(());
    };
    let shards = ShardSet::open(data)?;
    if shards.holds() != o.objective.data() {
        return Err(Error::Input(format!(
            "--data {}: it holds {}, but --objective {} trains on {}",
            data.display(),
            shards.holds().describe(),
            o.objective.name(),
            o.objective.data().describe()
        )));
    }
    let run_tok = o.base_run.join("tokenizer.json");
    let fingerprint = crate::train::run::run_tokenizer(&o.base_run)?.fingerprint();
    if shards.manifest.tokenizer_fingerprint != fingerprint {
        return Err(Error::Input(format!(
            "--data {}: made with another tokenizer than the base run's ({}); prepare it again with `--tokenizer {}`",
            data.display(),
            run_tok.display(),
            run_tok.display()
        )));
    }
    Ok(())
}

/// The settings a continued comparison must keep (`comparison.json`).
fn settings(o: &CompareOptions) -> serde_json::Value {
    serde_json::json!({
        "base_run": o.base_run,
        "objective": o.objective.name(),
        "data": o.data,
        "steps": o.steps,
        "overrides": o.overrides,
        "pretrain_seeds": o.pretrain_seeds,
        "finetune_seeds": o.finetune_seeds,
        "task_data": o.task_data,
        "contrast": o.contrast,
        "split": o.split,
    })
}

/// Runs (or continues) the comparison and writes `report.md` / `report.json` into `out`.
pub fn compare(o: &CompareOptions) -> Result<(CompareReport, String)> {
    crate::experiments::bootstrap::check_seeds("--pretrain-seeds", &o.pretrain_seeds)?;
    crate::experiments::bootstrap::check_seeds("--finetune-seeds", &o.finetune_seeds)?;
    if o.triplets.is_empty() {
        return Err(Error::Input(
            "no Hits triplet: no sentence has a word with a WordNet synonym and antonym".into(),
        ));
    }
    o.finetune.validate()?;
    check_inputs(o)?;
    // The base run's weights by content: a base pre-trained further is not mixed into the
    // arms that finished before.
    let mut recorded = settings(o);
    recorded["base_weights"] =
        crate::finetune::pretrained::weights_fingerprint(&o.base_run)?.into();
    crate::io::outputs::claim_folder(o.out.dir(), "comparison.json", &recorded)?;
    let arm_names = [BASELINE, o.objective.name()];
    let mut stages = Stages::new(
        COMMAND,
        arm_names.len() * o.pretrain_seeds.len() * 3,
        o.progress != Progress::Hidden,
    );
    let mut arms = Vec::new();
    for arm in arm_names {
        let mut scores = Vec::new();
        let mut hits_all = Vec::new();
        let mut runs = Vec::new();
        for &ps in &o.pretrain_seeds {
            let tag = format!("{arm}-seed{ps}");
            let run = o.out.dir().join("pretrain").join(&tag);
            stages.begin(&format!("pre-train {tag}"));
            pretrain_arm(o, arm, ps, &run)?;
            stages.finish(true);
            runs.push(run.clone());

            stages.begin(&format!("fine-tune {tag} on CAD-sentiment"));
            let ft = o.out.dir().join("finetune").join(&tag);
            let result = finetuned(o, &run, &ft)?;
            for (&fs, s) in o.finetune_seeds.iter().zip(&result.per_seed) {
                let seed_dir = ft.join(format!("seed-{fs}"));
                let path = seed_dir.join("contrast.json");
                let c = contrast_of(o, &seed_dir, &path)?;
                scores.push(SeedScores {
                    pretrain_seed: ps,
                    finetune_seed: fs,
                    dev_accuracy: s.metrics.get("accuracy").copied().unwrap_or(s.score),
                    contrast: c,
                });
            }
            stages.finish(true);

            stages.begin(&format!("Hits of {tag}"));
            let hits_path = o.out.dir().join("hits").join(format!("{tag}.json"));
            let h = hits_of(o, &run, &hits_path)?;
            hits_all.push(h);
            stages.finish(true);
        }
        let of =
            |f: &dyn Fn(&SeedScores) -> f64| summary(&scores.iter().map(f).collect::<Vec<_>>());
        arms.push(ArmReport {
            arm: arm.to_string(),
            runs,
            dev_accuracy: of(&|s| s.dev_accuracy),
            ori: of(&|s| s.contrast.ori),
            rev: of(&|s| s.contrast.rev),
            con: of(&|s| s.contrast.con),
            hits_cls: summary(&hits_all.iter().map(|h| h.max_cls).collect::<Vec<_>>()),
            hits_mean: summary(&hits_all.iter().map(|h| h.max_mean).collect::<Vec<_>>()),
            scores,
            hits: hits_all,
        });
    }
    let difference = differences(&arms[0], &arms[1], o.finetune_seeds.len());
    let report = CompareReport {
        base_run: o.base_run.clone(),
        steps: o.steps,
        contrast: o.contrast.clone(),
        arms,
        difference,
    };
    let md = report_table(&report, o);
    crate::io::write_atomic(&o.out.dir().join("report.md"), md.as_bytes())?;
    crate::io::write_json(&o.out.dir().join("report.json"), &report)?;
    Ok((report, md))
}

/// The compared arm's differences from the baseline's, per measure (bootstrap over the seed
/// grid: rows are pre-training seeds of `per_row` fine-tuning seeds each; Hits one a row).
fn differences(b: &ArmReport, c: &ArmReport, per_row: usize) -> Vec<(String, Summary, Interval)> {
    // Rows: pre-training seeds; entries: fine-tuning seeds (Hits: one per row).
    let grid = |a: &ArmReport, f: &dyn Fn(&SeedScores) -> f64| -> Vec<Vec<f64>> {
        a.scores
            .chunks(per_row)
            .map(|row| row.iter().map(f).collect())
            .collect()
    };
    let hits_grid = |a: &ArmReport, f: &dyn Fn(&HitsReport) -> f64| -> Vec<Vec<f64>> {
        a.hits.iter().map(|h| vec![f(h)]).collect()
    };
    let score_measures: [Measure<SeedScores>; 4] = [
        ("dev accuracy", |s| s.dev_accuracy),
        ("Ori", |s| s.contrast.ori),
        ("Rev", |s| s.contrast.rev),
        ("Con", |s| s.contrast.con),
    ];
    let hits_measures: [Measure<HitsReport>; 2] =
        [("Hits [CLS]", |h| h.max_cls), ("Hits mean", |h| h.max_mean)];
    let diff = |name: &str, (s, ci)| (name.to_string(), s, ci);
    score_measures
        .iter()
        .map(|(name, f)| diff(name, describe_difference(&grid(c, f), &grid(b, f))))
        .chain(hits_measures.iter().map(|(name, f)| {
            diff(
                name,
                describe_difference(&hits_grid(c, f), &hits_grid(b, f)),
            )
        }))
        .collect()
}

/// The fine-tuning of `run` on CAD-sentiment in `ft`: read back when finished, else (again)
/// run. A fine-tuning killed part-way is its own folder, started again.
fn finetuned(o: &CompareOptions, run: &Path, ft: &Path) -> Result<TaskResult> {
    if let Some(r) = finished(&ft.join("results.json")) {
        return Ok(r);
    }
    if ft.is_present() {
        crate::io::write::remove_folder(ft)?;
    }
    let pre = load_pretrained(run)?;
    let r = finetune_glue(
        GlueTask::named(SENTIMENT_TASK),
        &pre,
        &o.task_data,
        &o.finetune,
        crate::finetune::seeds::SeedPlan {
            seeds: &o.finetune_seeds,
            out: ft,
            progress: o.progress == Progress::Bar,
            report: &mut crate::experiments::stages::seed_lines(o.progress),
        },
    )?;
    write_results(ft, &r)?;
    Ok(r)
}

/// The contrast consistency of the fine-tuned `seed_dir`, kept in `path`.
fn contrast_of(o: &CompareOptions, seed_dir: &Path, path: &Path) -> Result<Consistency> {
    if let Some(c) = finished(path) {
        return Ok(c);
    }
    let c = evaluate_contrast(seed_dir, &o.contrast, &o.split, &o.finetune.device, false)?.scores;
    crate::io::write_json(path, &c)?;
    Ok(c)
}

/// The Hits of `run`, kept in `path`.
fn hits_of(o: &CompareOptions, run: &Path, path: &Path) -> Result<HitsReport> {
    if let Some(h) = finished(path) {
        return Ok(h);
    }
    let h = hits(&load_pretrained(run)?, &o.triplets, 32, 128)?;
    crate::io::write_json(path, &h)?;
    Ok(h)
}

fn cell(s: &Summary) -> String {
    format!("{:.1} ± {:.1}", s.mean, s.std)
}

/// The comparison as Markdown: Ori / Rev / Con and Hits side by side (Wang et al. 2021's
/// Tables 4 and 7).
pub fn report_table(r: &CompareReport, o: &CompareOptions) -> String {
    let mut md = format!(
        "# Baseline vs {}, continued {} steps from {}\n\n\
         Pre-training seeds {:?} × fine-tuning seeds {:?} on CAD-sentiment; contrast set {} ({}); \
         Hits on {} triplets. Mean ± sample standard deviation over seeds.\n\n",
        o.objective.name(),
        r.steps,
        r.base_run.display(),
        o.pretrain_seeds,
        o.finetune_seeds,
        r.contrast.display(),
        o.split,
        o.triplets.len()
    );
    md += "| model | dev acc. | Ori | Rev | Con | Hits [CLS] | Hits mean |\n|---|---:|---:|---:|---:|---:|---:|\n";
    for a in &r.arms {
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            a.arm,
            cell(&a.dev_accuracy),
            cell(&a.ori),
            cell(&a.rev),
            cell(&a.con),
            cell(&a.hits_cls),
            cell(&a.hits_mean)
        );
    }
    let name = o.objective.name();
    md += &format!(
        "\n| {name} − baseline (paired) | mean ± sd | 95 % interval (two-level bootstrap) | |\n|---|---:|---:|---|\n"
    );
    let (higher, lower) = (format!("{name} higher"), format!("{name} lower"));
    for (measure, s, ci) in &r.difference {
        let verdict = crate::experiments::bootstrap::verdict(
            ci,
            o.pretrain_seeds.len(),
            o.finetune_seeds.len(),
            &higher,
            &lower,
        );
        md += &format!(
            "| {measure} | {:+.1} ± {:.1} | [{:+.1}, {:+.1}] | {verdict} |\n",
            s.mean, s.std, ci.low, ci.high
        );
    }
    md
}
