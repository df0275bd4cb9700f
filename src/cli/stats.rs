//! `trueneg stats`: Hard Correction statistics over a run's checkpoints (the paper's Table 8).

use std::path::PathBuf;

use trueneg::frame::{Claim, FileKind, InputKind, OutputKind, Plan};
use trueneg::io::outputs::Outputs;
use trueneg::plot::{Series, line_plot};

#[derive(clap::Args)]
pub struct Args {
    /// The run folder whose checkpoints are measured.
    #[arg(long)]
    checkpoints: PathBuf,
    /// Text corpus to mask and predict (e.g. ../shared/data/wikitext-2/wiki.test.raw), or
    /// shards `prepare` wrote with the run's tokenizer.
    #[arg(long)]
    corpus: PathBuf,
    /// Synonym table [default: each checkpoint's own (a self-table run's), else the run's
    /// lexicon.safetensors, else WordNet].
    #[arg(long)]
    lexicon: Option<PathBuf>,
    /// Batches per checkpoint.
    #[arg(long, default_value_t = 50, value_parser = super::at_least(1))]
    batches: usize,
    /// Sequences per batch.
    #[arg(long, default_value_t = 32, value_parser = super::at_least(1))]
    batch_size: usize,
    /// Replace earlier correction-stats.* made with another lexicon.
    #[arg(long)]
    force: bool,
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        Ok(Plan::new("stats")
            .input("--checkpoints", &self.checkpoints, InputKind::Run)
            .input("--corpus", &self.corpus, InputKind::Corpus)
            .input_if(
                "--lexicon",
                self.lexicon.as_ref(),
                InputKind::File(FileKind::Lexicon),
            )
            .output("--checkpoints", &self.checkpoints, OutputKind::ReportsIn)
            .force(self.force))
    }

    fn run(self: Box<Self>, claim: &Claim, _: super::Ui) -> anyhow::Result<()> {
        run(*self, claim.outputs())
    }
}

fn run(a: Args, outputs: &Outputs) -> anyhow::Result<()> {
    let run = &a.checkpoints;
    // A folder of another kind is named as such before anything else is read.
    trueneg::train::run::run_model(run)?;
    let tok = trueneg::train::run::run_tokenizer(run)?;
    let given = a.lexicon.is_some();
    let table = super::run_synonym_table(run, a.lexicon, &tok, || {
        trueneg::text::synonym_table::wordnet_table(&tok, &super::wordnet_dir(&None))
    })?;
    let tables = trueneg::train::stats::JudgingTable { given, table };
    let source = tables.source(run);
    if !a.force {
        trueneg::train::stats::check_earlier_lexicon(run, &source)?;
    }
    // Files of the user's with these names are not replaced (nor anything with --force
    // that another command wrote): checked before the checkpoints are measured.
    let [png, json_file, md_file] =
        ["png", "json", "md"].map(|e| run.join(format!("correction-stats.{e}")));
    outputs.check(&[png.clone(), json_file.clone(), md_file.clone()])?;
    let stats = trueneg::train::stats::correction_stats(
        run,
        &a.corpus,
        &tables,
        a.batches,
        a.batch_size,
        trueneg::train::steps::kind_of,
    )?;
    let notes = trueneg::train::stats::stats_notes(run, &stats)?;
    let prediction = serde_json::to_value(notes.prediction)?;
    let mut md = format!(
        "Lexicon: {}\n\nPredictions: {} (the run's hc_prediction)\n\n{}",
        source,
        prediction.as_str().unwrap_or("argmax"),
        trueneg::train::stats::stats_table(&stats)
    );
    for note in notes.notes {
        eprintln!("note: {note}");
        md += &format!("\n**Note.** {note}.\n");
    }
    print!("{md}");
    type Level = fn(&trueneg::train::stats::CheckpointStats) -> f64;
    use trueneg::train::stats::{BATCH_LEVEL, ITERATION_LEVEL, PREDICTION_LEVEL};
    let levels: [(&str, Level); 3] = [
        (PREDICTION_LEVEL, |s| s.prediction_level),
        (ITERATION_LEVEL, |s| s.iteration_level),
        (BATCH_LEVEL, |s| s.batch_level),
    ];
    // One colour, dash pattern and marker each: lines that coincide stay apart.
    let series: Vec<Series> = levels
        .iter()
        .enumerate()
        .map(|(i, (name, level))| Series {
            name: name.to_string(),
            points: stats
                .iter()
                .map(|s| (s.step as f64, 100.0 * level(s)))
                .collect(),
            group: Some(name.to_string()),
            colour: Some(i),
        })
        .collect();
    line_plot(
        &png,
        "Hard Correction rates over training",
        "training step (checkpoint)",
        "%",
        &series,
        false,
    )?;
    outputs.record(&png)?;
    let json = serde_json::to_string_pretty(
        &serde_json::json!({"lexicon": source, "prediction": prediction, "checkpoints": stats}),
    )?;
    outputs.write(&json_file, json.as_bytes())?;
    outputs.write(&md_file, md.as_bytes())?;
    println!("wrote {}", png.display());
    Ok(())
}
