//! `trueneg compare`: one metric of several runs side by side.

use std::path::PathBuf;

use trueneg::frame::{Claim, InputKind, OutputKind, Plan};
use trueneg::io::outputs::Outputs;

#[derive(clap::Args)]
pub struct Args {
    /// Run folders (each with its metrics.jsonl).
    #[arg(long, required = true, num_args = 1..)]
    runs: Vec<PathBuf>,
    /// The plot to write: SVG when its name ends in .svg, else PNG. Runs share a colour per
    /// objective and differ by dashes and markers.
    #[arg(long)]
    out: PathBuf,
    /// The metrics.jsonl field to plot.
    #[arg(long, default_value = "mlm_loss")]
    metric: String,
    /// Log10 scale on the y axis.
    #[arg(long)]
    log_y: bool,
    /// Replace --out even when it is not a plot `compare` wrote.
    #[arg(long)]
    force: bool,
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        let mut plan = Plan::new("compare");
        for r in &self.runs {
            plan = plan.input("--runs", r, InputKind::Run);
        }
        Ok(plan
            .output("--out", &self.out, OutputKind::File)
            .force(self.force))
    }

    fn run(self: Box<Self>, claim: &Claim, _: super::Ui) -> anyhow::Result<()> {
        run(*self, claim.outputs())
    }
}

fn run(a: Args, outputs: &Outputs) -> anyhow::Result<()> {
    let mut series = Vec::new();
    for r in &a.runs {
        // A run that does not log the metric (an objective without that term) is left out of
        // the plot, with a note; the plot needs one run that does.
        let Some(mut s) = trueneg::train::metrics::metric_series(r, &a.metric)? else {
            eprintln!(
                "note: {}: no field `{}`: {} is left out of the plot",
                r.join("metrics.jsonl").display(),
                a.metric,
                r.display()
            );
            continue;
        };
        // A run's objective has its colour of every plot.
        s.colour = (s.group.as_deref())
            .and_then(trueneg::objective::ObjectiveKind::parse)
            .map(|k| k.colour());
        series.push(s);
    }
    if series.is_empty() {
        anyhow::bail!(
            "--metric {}: none of the runs logs it (a metrics.jsonl field, such as mlm_loss)",
            a.metric
        );
    }
    let label = trueneg::plot::metric_label(&a.metric, &trueneg::objective::term_labels());
    trueneg::plot::line_plot(
        &a.out,
        &format!("{label} by run"),
        "training step",
        &label,
        &series,
        a.log_y,
    )?;
    outputs.record(&a.out)?;
    println!("wrote {}", a.out.display());
    Ok(())
}
