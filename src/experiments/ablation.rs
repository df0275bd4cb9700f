//! The paper's ablation as one experiment: pre-train one model per (objective, pre-training
//! seed), measure Hard Correction's rates over the checkpoints of every HC run (Table 8),
//! fine-tune every model on each GLUE task over the fine-tuning seeds (Table 2), fine-tune it on
//! SQuAD and score it on the original and the attacked dev set (Tables 3 and 6), then write the
//! report ([`super::ablation_report`]). Its settings and results are [`super::ablation_spec`].
//!
//! **Pairing.** All runs of one pre-training seed start from the same initial weights, read the
//! same examples in the same order and draw the same masks (all follow `train.seed`); only the
//! objective differs. The pre-training seed changes all three. Fine-tuning seed f is the same
//! for every model. So the difference objective − baseline is paired on (pre-training seed,
//! fine-tuning seed).
//!
//! **Layout of `out`.** `experiment.json` (the settings; a continued experiment must match),
//! `data/` (the embedded corpus when the config names no shards), `pretrain/<objective>-seed<s>/`
//! (runs), `stats/<tag>.json`, `finetune/<tag>/<TASK>/results.json`, `squad/<tag>/robustness.json`,
//! then `report.md`, `report.json` and PNGs.
//!
//! **Resuming.** A stage whose output file is whole is reused, never redone; a run killed
//! part-way continues from its last checkpoint; a fine-tuning killed part-way starts that task
//! again in a clean folder.

use crate::io::PathQuery;
use std::path::{Path, PathBuf};

use crate::attack::{AttackKind, attack_squad};
pub use crate::experiments::ablation_spec::{
    ATTACKS, AblationOptions, AblationSpec, AttackScores, RunResults, SquadRobustness,
};
use crate::experiments::stages::Stages;
use crate::finetune::pretrained::{PretrainedEncoder, load_pretrained};
use crate::finetune::qa_features::QaOptions;
use crate::finetune::seeds::{
    SeedPlan, TaskResult, finetune_glue, finetune_qa, squad_scores, squad_splits,
};
use crate::finetune::span::{load_qa, predict_squad};
use crate::objective::ObjectiveKind;
use crate::tasks::glue::GlueTask;
use crate::tasks::squad::SquadExample;
use crate::text::SynonymTable;
use crate::text::shards::ShardSet;
use crate::train::config::PretrainConfig;
use crate::train::pretrain::{Progress, RunOptions, pretrain};
use crate::train::run::{new_run, resume_run};
use crate::train::stats::{CheckpointStats, correction_stats};
use crate::{Error, Result};

/// A stage's output when it is there and whole (else the stage runs again).
fn finished<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    crate::io::read_json(path).ok()
}

/// The corpus every run of an experiment trains on: its shards and, for a config with a second
/// phase (`[phase2]`) on the embedded default corpus, that phase's, prepared beside them.
struct Corpus {
    shards: PathBuf,
    phase2: Option<PathBuf>,
}

/// The pre-training config of one run: the experiment's config and overrides, the objective,
/// the seed, the shared corpus, `checkpoints` evenly spaced over the config's `steps` (all kept
/// for HC runs).
fn run_config(
    spec: &AblationSpec,
    steps: u64,
    kind: ObjectiveKind,
    seed: u64,
    corpus: &Corpus,
) -> Result<PretrainConfig> {
    let every = (steps / spec.checkpoints).max(1);
    let keep = if kind.reports_corrections() {
        spec.checkpoints as usize + 1
    } else {
        1
    };
    let mut sets = spec.overrides.clone();
    sets.extend([
        format!("objective.kind={}", kind.name()),
        format!("train.seed={seed}"),
        format!("data.shards={}", corpus.shards.display()),
        format!("train.checkpoint_every={every}"),
        format!("train.keep_checkpoints={keep}"),
    ]);
    if let Some(p) = &corpus.phase2 {
        sets.push(format!("phase2.shards={}", p.display()));
    }
    if let Some(d) = &spec.device {
        sets.push(format!("train.device={d}"));
    }
    let mut cfg = PretrainConfig::load(&spec.config, &sets)?;
    cfg.absolute_paths()?;
    Ok(cfg)
}

fn pretrain_run(
    o: &AblationOptions,
    steps: u64,
    kind: ObjectiveKind,
    seed: u64,
    corpus: &Corpus,
) -> Result<bool> {
    let dir = o
        .out
        .child(Path::new("pretrain").join(AblationSpec::tag(kind, seed)))?;
    let folder = if dir.dir().join("config.toml").is_present() {
        resume_run(&dir, &[])?
    } else {
        new_run(run_config(&o.spec, steps, kind, seed, corpus)?, &dir)?
    };
    let set = ShardSet::open(&corpus.shards)?;
    let s = pretrain(
        &folder.config,
        &set,
        &RunOptions {
            run_dir: dir.dir().to_path_buf(),
            resume: folder.resume,
            progress: o.progress,
            stop: Some(crate::stop::flag()),
        },
    )?;
    Ok(!s.already_finished)
}

/// Table 8 over the run's checkpoints, with the run's own synonym table (each checkpoint's,
/// where the run rebuilt it).
fn run_stats(run: &Path, corpus: &Path, batches: usize) -> Result<Vec<CheckpointStats>> {
    let tok = crate::train::run::run_tokenizer(run)?;
    let table = SynonymTable::load_for(&run.join("lexicon.safetensors"), &tok.fingerprint())?;
    let tables = crate::train::stats::JudgingTable {
        table,
        given: false,
    };
    correction_stats(
        run,
        corpus,
        &tables,
        batches,
        32,
        crate::train::steps::kind_of,
    )
}

fn remove_models(dir: &Path) -> Result<()> {
    for name in crate::io::read::names(dir) {
        let seed = dir.join(&name);
        if name.starts_with("seed-") && crate::io::read::is_folder(&seed) {
            // Predictions stay; the weights go.
            crate::io::write::remove_file(&seed.join("model.safetensors"))?;
        }
    }
    Ok(())
}

/// A folder for a stage that starts again: what a killed attempt left is removed.
fn fresh(dir: &Path) -> Result<()> {
    if dir.is_present() {
        crate::io::write::remove_folder(dir)?;
    }
    Ok(())
}

/// The SQuAD data of the experiment: training and dev questions and each attack's copy of dev.
struct SquadData {
    train: Vec<SquadExample>,
    dev: Vec<SquadExample>,
    attacked: Vec<(AttackKind, Vec<SquadExample>)>,
}

fn squad_data(spec: &AblationSpec) -> Result<Option<SquadData>> {
    let Some(path) = &spec.squad else {
        return Ok(None);
    };
    let (train, dev) = squad_splits(path, spec.squad_train, spec.squad_eval)?;
    let wn = crate::lexicon::WordNet::open(&crate::text::default_corpus::default_wordnet_dir())?;
    let attacked = ATTACKS
        .iter()
        .map(|&k| (k, attack_squad(k, &dev, &wn, spec.attack_seed)))
        .collect();
    Ok(Some(SquadData {
        train,
        dev,
        attacked,
    }))
}

fn squad_stage(
    o: &AblationOptions,
    pre: &PretrainedEncoder,
    data: &SquadData,
    dir: &Path,
) -> Result<SquadRobustness> {
    let opts = o.spec.squad_options(pre.config.max_position_embeddings);
    opts.validate()?;
    let qa = QaOptions {
        max_seq_len: opts.max_seq_len,
        ..QaOptions::default()
    };
    let ori = finetune_qa(
        pre,
        &data.train,
        &data.dev,
        &opts,
        &qa,
        SeedPlan {
            seeds: &o.spec.finetune_seeds,
            out: dir,
            progress: o.progress == Progress::Bar,
            report: &mut crate::experiments::stages::seed_lines(o.progress),
        },
    )?;
    let device = crate::device::device_for(&opts.device)?;
    let mut attacks: Vec<AttackScores> = data
        .attacked
        .iter()
        .map(|(kind, _)| AttackScores {
            attack: kind.name().to_string(),
            per_seed: Vec::new(),
        })
        .collect();
    // Each fine-tuned model is read once and scored on every attacked copy.
    for &fs in &o.spec.finetune_seeds {
        let seed_dir = dir.join(format!("seed-{fs}"));
        let (m, tok) = load_qa(&seed_dir, &device)?;
        for ((kind, dev), scores) in data.attacked.iter().zip(&mut attacks) {
            let (answers, _) = predict_squad(&m, &tok, dev, &device, false)?;
            crate::finetune::seeds::write_predictions(
                &seed_dir.join(format!("predictions-{}.json", kind.name())),
                &answers,
            )?;
            scores.per_seed.push(squad_scores(dev, &answers));
        }
    }
    Ok(SquadRobustness { ori, attacks })
}

/// Runs (or continues) the experiment, writes the report into `out` and returns it with its
/// Markdown.
/// HC's correction statistics of `run` on `corpus`, kept in `path`; whether they were computed
/// now.
fn stats_stage(
    run: &Path,
    corpus: &Path,
    batches: usize,
    path: &Path,
) -> Result<(Vec<CheckpointStats>, bool)> {
    if let Some(s) = finished(path) {
        return Ok((s, false));
    }
    let s = run_stats(run, corpus, batches)?;
    crate::io::write_json(path, &s)?;
    Ok((s, true))
}

/// The encoder of `run`, loaded once for all its fine-tunings.
fn encoder<'a>(
    pre: &'a mut Option<PretrainedEncoder>,
    run: &Path,
) -> Result<&'a PretrainedEncoder> {
    if pre.is_none() {
        *pre = Some(load_pretrained(run)?);
    }
    Ok(pre.as_ref().expect("loaded"))
}

/// Fine-tuning `run` on GLUE `task` in `dir` (kept in its results.json); whether it ran now.
fn glue_stage(
    o: &AblationOptions,
    task: GlueTask,
    run: &Path,
    dir: &Path,
    pre: &mut Option<PretrainedEncoder>,
) -> Result<(TaskResult, bool)> {
    if let Some(r) = finished::<TaskResult>(&dir.join("results.json")) {
        return Ok((r, false));
    }
    fresh(dir)?;
    let spec = &o.spec;
    let r = finetune_glue(
        task,
        encoder(pre, run)?,
        &spec.glue.as_ref().expect("validated").join(task.dir_name()),
        &spec.glue_options(task),
        SeedPlan {
            seeds: &o.spec.finetune_seeds,
            out: dir,
            progress: o.progress == Progress::Bar,
            report: &mut crate::experiments::stages::seed_lines(o.progress),
        },
    )?;
    if !o.keep_models {
        remove_models(dir)?;
    }
    crate::finetune::seeds::write_results(dir, &r)?;
    Ok((r, true))
}

/// SQuAD and its attacks on `run` in `dir` (kept in robustness.json); whether it ran now.
fn squad_run(
    o: &AblationOptions,
    data: &SquadData,
    run: &Path,
    dir: &Path,
    pre: &mut Option<PretrainedEncoder>,
) -> Result<(SquadRobustness, bool)> {
    let path = dir.join("robustness.json");
    if let Some(r) = finished::<SquadRobustness>(&path) {
        return Ok((r, false));
    }
    fresh(dir)?;
    let r = squad_stage(o, encoder(pre, run)?, data, dir)?;
    if !o.keep_models {
        remove_models(dir)?;
    }
    crate::io::write_json(&path, &r)?;
    Ok((r, true))
}

/// What the experiment's folder records of its settings: the spec, and a config file by
/// content, so that an edited file is not mixed into the runs that finished before.
fn recorded_settings(spec: &AblationSpec) -> Result<serde_json::Value> {
    let mut settings = serde_json::to_value(spec).expect("spec as JSON");
    if !crate::train::config::is_preset(&spec.config) {
        settings["config_file"] =
            crate::io::read::sha256(std::path::Path::new(&spec.config))?.into();
    }
    Ok(settings)
}

/// The corpus every run trains on: the config's shards, or the embedded default prepared once
/// in the experiment's folder (with the second phase's beside it when the config has one).
fn shared_corpus(o: &AblationOptions, base: &PretrainConfig) -> Result<Corpus> {
    Ok(match &base.data.shards {
        Some(s) => Corpus {
            shards: s.clone(),
            phase2: None,
        },
        None => {
            let shards = crate::train::default_data::ensure_default_shards(
                &o.out,
                base,
                o.progress == Progress::Bar,
            )?;
            let phase2 = base.phase2.as_ref().filter(|p| p.shards.is_none());
            Corpus {
                phase2: phase2.map(|_| crate::train::default_data::phase2_shards_dir(&shards)),
                shards,
            }
        }
    })
}

pub fn ablation(
    o: &AblationOptions,
) -> Result<(crate::experiments::ablation_report::AblationReport, String)> {
    let spec = &o.spec;
    spec.validate()?;
    crate::io::outputs::claim_folder(o.out.dir(), "experiment.json", &recorded_settings(spec)?)?;

    let base = PretrainConfig::load(&spec.config, &spec.overrides)?;
    let corpus = shared_corpus(o, &base)?;
    let hc_runs = spec.objectives.iter().any(|k| k.reports_corrections());
    let stats_corpus = match (&spec.stats_corpus, &base.data.shards) {
        (Some(c), _) => Some(c.clone()),
        (None, None) => Some(o.out.dir().join("corpus").join("wordnet-glosses.txt")),
        (None, Some(_)) if hc_runs => {
            return Err(Error::Config(
                "--stats-corpus: the HC statistics need a text corpus (e.g. WikiText-2's wiki.test.raw, as in the paper)".into(),
            ));
        }
        (None, Some(_)) => None,
    };
    let squad = squad_data(spec)?;

    let per_run = 1 + spec.tasks.len() + usize::from(squad.is_some());
    let n_stats = spec
        .objectives
        .iter()
        .filter(|k| k.reports_corrections())
        .count();
    let mut stages = Stages::new(
        "ablation",
        spec.pretrain_seeds.len() * (spec.objectives.len() * per_run + n_stats),
        o.progress != Progress::Hidden,
    );
    let mut runs = Vec::new();
    // Seed-major: a stopped experiment has whole pairs (every objective of the first seeds).
    for &seed in &spec.pretrain_seeds {
        for &kind in &spec.objectives {
            let tag = AblationSpec::tag(kind, seed);
            let run = o.out.dir().join("pretrain").join(&tag);
            stages.begin(&format!("pre-train {tag}"));
            let ran = pretrain_run(o, base.train.steps, kind, seed, &corpus)?;
            stages.finish(ran);

            let stats = if kind.reports_corrections() {
                stages.begin(&format!("HC statistics of {tag}"));
                let path = o.out.dir().join("stats").join(format!("{tag}.json"));
                let corpus = stats_corpus.as_ref().expect("checked above");
                let (s, ran) = stats_stage(&run, corpus, spec.stats_batches, &path)?;
                stages.finish(ran);
                Some(s)
            } else {
                None
            };

            let mut pre: Option<PretrainedEncoder> = None;
            let mut glue = Vec::new();
            for &task in &spec.tasks {
                stages.begin(&format!("fine-tune {tag} on {}", task.dir_name()));
                let dir = o
                    .out
                    .dir()
                    .join("finetune")
                    .join(&tag)
                    .join(task.dir_name());
                let (r, ran) = glue_stage(o, task, &run, &dir, &mut pre)?;
                stages.finish(ran);
                glue.push(r);
            }

            let squad_result = match &squad {
                None => None,
                Some(data) => {
                    stages.begin(&format!("SQuAD and its attacks on {tag}"));
                    let dir = o.out.dir().join("squad").join(&tag);
                    let (r, ran) = squad_run(o, data, &run, &dir, &mut pre)?;
                    stages.finish(ran);
                    Some(r)
                }
            };
            runs.push(RunResults {
                objective: kind,
                pretrain_seed: seed,
                run,
                glue,
                squad: squad_result,
                stats,
            });
        }
    }
    let report = crate::experiments::ablation_report::build(spec, runs);
    let md = crate::experiments::ablation_report::write(&report, o.out.dir())?;
    Ok((report, md))
}
