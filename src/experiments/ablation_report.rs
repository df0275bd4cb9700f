//! The ablation's report: the paper's Tables 2 (GLUE dev), 3 (SQuAD v1.1 dev), 6 (robustness:
//! the EM drop under SwapSynWordNet and AddSentDiverse) and 8 (Hard Correction rates over
//! checkpoints) laid out with our runs, the paper's own numbers beside them, and every
//! objective's paired difference to the baseline.
//!
//! **Statistics.** Every score is a grid over (pre-training seed × fine-tuning seed). A cell is
//! its mean ± sample standard deviation over all fine-tuned models and a 95 % two-level
//! percentile bootstrap interval of the mean ([`super::bootstrap`], 10,000 draws, fixed seed 1).
//! The GLUE average is taken per (pre-training seed, fine-tuning seed) over the tasks, then
//! treated as one more score. A difference objective − baseline is paired on the same seeds;
//! when its interval contains 0 the report says so. Table 8 gives mean ± sd over pre-training
//! seeds per checkpoint.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::experiments::ablation_spec::{ATTACKS, AblationSpec, RunResults};
use crate::experiments::bootstrap::{Interval, RESAMPLES, describe, describe_difference, verdict};
use crate::finetune::seeds::{Summary, summary};
use crate::objective::ObjectiveKind;
use crate::plot::{IntervalSeries, Series, interval_plot, line_plot};
use crate::tasks::glue::GlueTask;
use crate::tasks::task::Task;

/// A score over seeds: mean ± sd and the bootstrap interval of the mean.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Cell {
    pub summary: Summary,
    pub interval: Interval,
}

/// One measure of one objective (e.g. `CoLA`, `GLUE avg`, `SQuAD EM`,
/// `SwapSynWordNet EM drop`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measured {
    pub objective: String,
    pub measure: String,
    pub cell: Cell,
}

/// Hard Correction rates of one HC objective at one checkpoint, over pre-training seeds (%).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RateRow {
    pub objective: String,
    pub step: u64,
    pub mismatched: Summary,
    pub prediction_level: Summary,
    /// Sequences with at least one correction (the paper's iteration level).
    pub iteration_level: Summary,
    /// Batches with at least one correction.
    pub batch_level: Summary,
}

/// A number the paper reports (ELECTRA-Small, 1M steps on OpenWebText).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PaperNumber {
    pub objective: String,
    pub measure: String,
    pub value: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AblationReport {
    pub spec: AblationSpec,
    /// Every measure of every objective.
    pub scores: Vec<Measured>,
    /// Objective − baseline, paired by seeds.
    pub differences: Vec<Measured>,
    pub rates: Vec<RateRow>,
    pub paper: Vec<PaperNumber>,
    pub runs: Vec<RunResults>,
}

/// The paper's figures (Zhang et al., AAAI 2023: the GLUE averages, SQuAD and robustness
/// numbers the ablation compares with; no per-task numbers, `—` in the tables).
fn paper_numbers() -> Vec<PaperNumber> {
    let n = |o: &str, m: &str, v: &str| PaperNumber {
        objective: o.into(),
        measure: m.into(),
        value: v.into(),
    };
    vec![
        n("baseline", "GLUE avg", "80.4"),
        n("sr", "GLUE avg", "81.9"),
        n("hc", "GLUE avg", "81.4"),
        n("baseline", "SQuAD EM", "75.8"),
        n("sr", "SQuAD EM", "76.0"),
        n("hc", "SQuAD EM", "77.7"),
        n("baseline", "SwapSynWordNet EM drop", "6.0"),
        n("hc", "SwapSynWordNet EM drop", "2.7"),
        n("baseline", "AddSentDiverse EM drop", "55.0"),
        n("sr", "AddSentDiverse EM drop", "41.6"),
        n("hc", "prediction level %", "1–2"),
        n("hc", "iteration level %", "6–7"),
    ]
}

/// The paper's figures that this ablation measures the same way: its GLUE average is the
/// mean of the 8 GLUE tasks' dev scores (each on its whole training set), its SQuAD figures
/// are over the whole dev set. A figure computed otherwise here gets no paper row beside it.
pub fn comparable_paper_numbers(spec: &AblationSpec) -> Vec<PaperNumber> {
    let glue = GlueTask::glue();
    let all_glue = glue.iter().all(|t| spec.tasks.contains(t))
        && spec.tasks.len() == glue.len()
        && spec.max_train_examples == 0;
    let whole_squad = spec.squad_eval == 0 && spec.squad_train == 0;
    paper_numbers()
        .into_iter()
        .filter(|p| match p.measure.as_str() {
            "GLUE avg" => all_glue,
            m if m.starts_with("SQuAD") || m.ends_with("EM drop") => whole_squad,
            _ => true,
        })
        .collect()
}

/// Grids of every measure for one objective: (measure, rows = pre-training seeds, entries =
/// fine-tuning seeds), in report order.
fn grids(runs: &[&RunResults]) -> Vec<(String, Vec<Vec<f64>>)> {
    let mut out: Vec<(String, Vec<Vec<f64>>)> = Vec::new();
    let Some(first) = runs.first() else {
        return out;
    };
    for (t, task) in first.glue.iter().enumerate() {
        let g = runs
            .iter()
            .map(|r| r.glue[t].per_seed.iter().map(|s| s.score).collect())
            .collect();
        out.push((task.task.clone(), g));
    }
    if first.glue.len() > 1 {
        let g = runs
            .iter()
            .map(|r| {
                let n = r.glue[0].per_seed.len();
                (0..n)
                    .map(|j| {
                        r.glue.iter().map(|t| t.per_seed[j].score).sum::<f64>()
                            / r.glue.len() as f64
                    })
                    .collect()
            })
            .collect();
        out.push(("GLUE avg".into(), g));
    }
    if first.squad.is_some() {
        let metric = |r: &RunResults, k: &str| -> Vec<f64> {
            let sq = r.squad.as_ref().expect("every run has SQuAD");
            sq.ori.per_seed.iter().map(|s| s.metrics[k]).collect()
        };
        out.push((
            "SQuAD EM".into(),
            runs.iter().map(|r| metric(r, "em")).collect(),
        ));
        out.push((
            "SQuAD F1".into(),
            runs.iter().map(|r| metric(r, "f1")).collect(),
        ));
        for (a, kind) in ATTACKS.iter().enumerate() {
            let trans: Vec<Vec<f64>> = runs
                .iter()
                .map(|r| {
                    let sq = r.squad.as_ref().expect("every run has SQuAD");
                    sq.attacks[a]
                        .per_seed
                        .iter()
                        .map(|s| s.metrics["em"])
                        .collect()
                })
                .collect();
            let drop = runs
                .iter()
                .zip(&trans)
                .map(|(r, t)| metric(r, "em").iter().zip(t).map(|(o, t)| o - t).collect())
                .collect();
            out.push((format!("{} EM", kind.name()), trans));
            out.push((format!("{} EM drop", kind.name()), drop));
        }
    }
    out
}

impl From<(Summary, Interval)> for Cell {
    fn from((summary, interval): (Summary, Interval)) -> Self {
        Self { summary, interval }
    }
}

/// Scores, paired differences and rates from the runs (in spec order, seed-major).
pub fn build(spec: &AblationSpec, runs: Vec<RunResults>) -> AblationReport {
    let of = |k: ObjectiveKind| -> Vec<&RunResults> {
        spec.pretrain_seeds
            .iter()
            .filter_map(|s| {
                runs.iter()
                    .find(|r| r.objective == k && r.pretrain_seed == *s)
            })
            .collect()
    };
    let base = grids(&of(ObjectiveKind::BASELINE));
    let mut scores = Vec::new();
    let mut differences = Vec::new();
    let mut rates = Vec::new();
    for &k in &spec.objectives {
        let mine = of(k);
        let g = grids(&mine);
        for ((measure, grid), (_, base_grid)) in g.iter().zip(&base) {
            scores.push(Measured {
                objective: k.name().into(),
                measure: measure.clone(),
                cell: describe(grid).into(),
            });
            if k != ObjectiveKind::BASELINE {
                differences.push(Measured {
                    objective: k.name().into(),
                    measure: measure.clone(),
                    cell: describe_difference(grid, base_grid).into(),
                });
            }
        }
        if let Some(first) = mine.first().and_then(|r| r.stats.as_ref()) {
            for (i, c) in first.iter().enumerate() {
                let at = |f: &dyn Fn(&crate::train::stats::CheckpointStats) -> f64| {
                    summary(
                        &mine
                            .iter()
                            .filter_map(|r| r.stats.as_ref().and_then(|s| s.get(i)))
                            .map(f)
                            .collect::<Vec<_>>(),
                    )
                };
                rates.push(RateRow {
                    objective: k.name().into(),
                    step: c.step,
                    mismatched: at(&|s| {
                        100.0 * s.counts.mismatched as f64 / s.counts.masked.max(1) as f64
                    }),
                    prediction_level: at(&|s| 100.0 * s.prediction_level),
                    iteration_level: at(&|s| 100.0 * s.iteration_level),
                    batch_level: at(&|s| 100.0 * s.batch_level),
                });
            }
        }
    }
    AblationReport {
        spec: spec.clone(),
        scores,
        differences,
        rates,
        paper: comparable_paper_numbers(spec),
        runs,
    }
}

fn show(c: &Cell) -> String {
    format!(
        "{:.1} ± {:.1} [{:.1}, {:.1}]",
        c.summary.mean, c.summary.std, c.interval.low, c.interval.high
    )
}

fn find<'a>(v: &'a [Measured], objective: &str, measure: &str) -> Option<&'a Measured> {
    v.iter()
        .find(|m| m.objective == objective && m.measure == measure)
}

fn paper<'a>(r: &'a AblationReport, objective: &str, measure: &str) -> Option<&'a str> {
    r.paper
        .iter()
        .find(|p| p.objective == objective && p.measure == measure)
        .map(|p| p.value.as_str())
}

/// A table: one row per objective (and the paper's row where it has numbers), one column per
/// measure.
fn table(r: &AblationReport, measures: &[String]) -> String {
    let mut md = String::from("| objective |");
    let mut sep = String::from("|---|");
    for m in measures {
        md += &format!(" {m} |");
        sep += "---:|";
    }
    md += &format!("\n{sep}\n");
    for k in &r.spec.objectives {
        let name = k.name();
        md += &format!("| {name} |");
        for m in measures {
            md += &format!(
                " {} |",
                find(&r.scores, name, m)
                    .map(|s| show(&s.cell))
                    .unwrap_or_default()
            );
        }
        md += "\n";
    }
    for k in &r.spec.objectives {
        let name = k.name();
        if measures.iter().any(|m| paper(r, name, m).is_some()) {
            md += &format!("| paper: {name} |");
            for m in measures {
                md += &format!(" {} |", paper(r, name, m).unwrap_or("—"));
            }
            md += "\n";
        }
    }
    md
}

/// The report's measures in order of first appearance, those `keep` accepts.
fn measures(r: &AblationReport, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut m: Vec<String> = Vec::new();
    for x in &r.scores {
        if keep(&x.measure) && !m.contains(&x.measure) {
            m.push(x.measure.clone());
        }
    }
    m
}

/// The report as Markdown.
pub fn markdown(r: &AblationReport) -> String {
    let s = &r.spec;
    let measures = measures(r, |_| true);
    let glue: Vec<String> = measures
        .iter()
        .filter(|m| {
            !m.starts_with(Task::Squad.display_name())
                && !ATTACKS.iter().any(|a| m.starts_with(a.name()))
        })
        .cloned()
        .collect();
    let squad: Vec<String> = measures
        .iter()
        .filter(|m| m.starts_with(Task::Squad.display_name()))
        .cloned()
        .collect();
    let robust: Vec<String> = measures
        .iter()
        .filter(|m| ATTACKS.iter().any(|a| m.starts_with(a.name())))
        .cloned()
        .collect();
    let objectives: Vec<&str> = s.objectives.iter().map(|k| k.name()).collect();
    let mut md = format!(
        "# Ablation: {} on `{}`\n\n\
         Pre-training seeds {:?} × fine-tuning seeds {:?}. Each cell: mean ± sample standard \
         deviation over the {} fine-tuned models, and the 95 % two-level bootstrap interval of \
         the mean [low, high] (resampling pre-training seeds, then fine-tuning seeds within \
         each; {RESAMPLES} draws). Runs of one pre-training seed share initial weights, data \
         order and masks; differences to the baseline are paired on the seeds. The paper's \
         rows are ELECTRA-Small after 1M steps on OpenWebText: a reference for the direction \
         of an effect, not a number a small run should reach.\n\n",
        objectives.join(", "),
        s.config,
        s.pretrain_seeds,
        s.finetune_seeds,
        s.pretrain_seeds.len() * s.finetune_seeds.len(),
    );
    if !s.overrides.is_empty() {
        md += &format!("Overrides: `{}`.\n\n", s.overrides.join(" "));
    }
    let zero = r
        .differences
        .iter()
        .filter(|d| d.cell.interval.contains_zero())
        .count();
    md += &format!(
        "**{zero} of {} paired differences to the baseline have a 95 % interval that contains 0.**\n\n",
        r.differences.len()
    );
    if !glue.is_empty() {
        md += "## GLUE dev (the paper's Table 2)\n\nCoLA: Matthews correlation; STS-B: Spearman correlation; others accuracy (×100), as ELECTRA and the paper report them (MRPC's and QQP's F1, STS-B's Pearson are in each run's results.json). The paper's GLUE average is shown only when all 8 GLUE tasks ran on their whole training sets.\n\n";
        md += &table(r, &glue);
        md += "\n";
    }
    if !squad.is_empty() {
        md += &format!(
            "## SQuAD v1.1 dev (the paper's Table 3)\n\n{} training questions, {} dev questions.\n\n",
            s.squad_train, s.squad_eval
        );
        md += &table(r, &squad);
        md += "\n## Robustness on SQuAD (the paper's Table 6)\n\nEM on each attack's transformed dev set and the drop from the original EM (smaller is more robust).\n\n";
        md += &table(r, &robust);
        md += "\n";
    }
    if !r.differences.is_empty() {
        md += "## Paired differences to the baseline\n\n| objective | measure | mean ± sd | 95 % interval | |\n|---|---|---:|---:|---|\n";
        for d in &r.differences {
            md += &format!(
                "| {} | {} | {:+.2} ± {:.2} | [{:+.2}, {:+.2}] | {} |\n",
                d.objective,
                d.measure,
                d.cell.summary.mean,
                d.cell.summary.std,
                d.cell.interval.low,
                d.cell.interval.high,
                verdict(
                    &d.cell.interval,
                    r.spec.pretrain_seeds.len(),
                    r.spec.finetune_seeds.len(),
                    "higher than baseline",
                    "lower than baseline"
                )
            );
        }
        md += "\nFor an EM drop, a negative difference means more robust than the baseline.\n\n";
    }
    if !r.rates.is_empty() {
        md += "## Hard Correction over checkpoints (the paper's Table 8)\n\n\
                Mean ± sd over pre-training seeds. Mismatched: masked predictions that differ \
                from the gold token; prediction level: mismatched predictions HC drops as \
                synonyms; iteration level: sequences with at least one correction (the \
                paper's, whose 1.41 % and 7.07 % fit one 128-token sequence per iteration); \
                batch level: batches with one. The paper's Table 8 (its 200k-step continued \
                runs) reports 1–2 % and 6–7 %.\n\n\
                | objective | step | mismatched % | prediction level % | iteration level % | batch level % |\n\
                |---|---:|---:|---:|---:|---:|\n";
        for row in &r.rates {
            let c = |x: &Summary| format!("{:.2} ± {:.2}", x.mean, x.std);
            md += &format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                row.objective,
                row.step,
                c(&row.mismatched),
                c(&row.prediction_level),
                c(&row.iteration_level),
                c(&row.batch_level)
            );
        }
        md += "\n";
    }
    md += "Figures: `scores.png` (every measure with its interval), `differences.png` (paired differences), `correction-rates.png` (HC runs).\n";
    md
}

/// Writes `report.md`, `report.json` and the PNGs into `out`; returns the Markdown.
pub fn write(r: &AblationReport, out: &Path) -> Result<String> {
    let md = markdown(r);
    crate::io::write_atomic(&out.join("report.md"), md.as_bytes())?;
    crate::io::write_json(&out.join("report.json"), r)?;
    for png in plots(r, out)? {
        tracing::debug!("wrote {}", png.display());
    }
    Ok(md)
}

fn interval_series(
    v: &[Measured],
    objectives: &[&str],
    measures: &[String],
) -> Vec<IntervalSeries> {
    objectives
        .iter()
        .map(|o| IntervalSeries {
            name: o.to_string(),
            colour: ObjectiveKind::parse(o).map(|k| k.colour()),
            points: measures
                .iter()
                .map(|m| {
                    find(v, o, m).map(|x| {
                        (
                            x.cell.interval.mean,
                            x.cell.interval.low,
                            x.cell.interval.high,
                        )
                    })
                })
                .collect(),
        })
        .collect()
}

fn plots(r: &AblationReport, out: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    // Raw attacked EM is in the table; the plots show the drop.
    let measures = measures(r, |m| {
        !(m.ends_with(" EM") && ATTACKS.iter().any(|a| m.starts_with(a.name())))
    });
    let all: Vec<&str> = r.spec.objectives.iter().map(|k| k.name()).collect();
    for path in [out.join("scores.png"), out.join("scores.svg")] {
        interval_plot(
            &path,
            "Scores per objective (mean, 95 % bootstrap interval)",
            "score",
            &measures,
            &interval_series(&r.scores, &all, &measures),
            false,
        )?;
        written.push(path);
    }
    let others: Vec<&str> = all.iter().copied().filter(|o| *o != "baseline").collect();
    if !others.is_empty() {
        for path in [out.join("differences.png"), out.join("differences.svg")] {
            interval_plot(
                &path,
                "Objective − baseline, paired (mean, 95 % bootstrap interval)",
                "difference",
                &measures,
                &interval_series(&r.differences, &others, &measures),
                true,
            )?;
            written.push(path);
        }
    }
    if !r.rates.is_empty() {
        let mut series = Vec::new();
        for k in r.spec.objectives.iter().filter(|k| k.reports_corrections()) {
            for (name, f) in [
                (
                    "prediction level",
                    (|x: &RateRow| x.prediction_level.mean) as fn(&RateRow) -> f64,
                ),
                ("iteration level", |x: &RateRow| x.iteration_level.mean),
            ] {
                series.push(Series {
                    name: format!("{}: {name}", k.name()),
                    points: r
                        .rates
                        .iter()
                        .filter(|x| x.objective == k.name())
                        .map(|x| (x.step as f64, f(x)))
                        .collect(),
                    group: Some(k.name().to_string()),
                    colour: Some(k.colour()),
                });
            }
        }
        for path in [
            out.join("correction-rates.png"),
            out.join("correction-rates.svg"),
        ] {
            line_plot(
                &path,
                "Hard Correction rates over training (mean over seeds)",
                "training step",
                "corrected (%)",
                &series,
                false,
            )?;
            written.push(path);
        }
    }
    Ok(written)
}
