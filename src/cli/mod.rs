//! The `trueneg` command line: one module per subcommand, each a clap `Args` struct that is a
//! [`Command`]: its plan (what it reads, writes and needs), then a short run that calls the
//! library inside the frame ([`trueneg::frame::execute`]), the one path every subcommand takes.
//! No other module knows the command line.

mod ablation;
mod attack;
mod bench;
mod compare;
mod compare_continued;
mod evaluate;
mod export;
mod finetune;
mod hits;
mod inspect;
mod lexicon;
mod prepare;
mod pretrain;
mod stats;

use std::io::IsTerminal;
use std::path::PathBuf;
use trueneg::io::PathQuery;

use clap::{Parser, Subcommand};
use trueneg::train::pretrain::Progress;

#[derive(Parser)]
#[command(
    name = "trueneg",
    version = trueneg::VERSION,
    about = "Pre-train BERT / ELECTRA encoders on true negatives, fine-tune and evaluate them"
)]
pub struct Cli {
    /// Hide progress bars and progress lines.
    #[arg(long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Subcommands,
}

#[derive(Subcommand)]
enum Subcommands {
    /// Tokenize and pack a corpus into memory-mapped shards.
    Prepare(prepare::Args),
    /// Pre-train (or continue) a BERT or ELECTRA model.
    Pretrain(pretrain::Args),
    /// Export a run's checkpoint in transformers' layout (config.json + model.safetensors).
    Export(export::Args),
    /// Synonym lexicons for a tokenizer.
    Lexicon {
        #[command(subcommand)]
        command: lexicon::Command,
    },
    /// Correction statistics over a run's checkpoints (the paper's Table 8) and their plot.
    Stats(stats::Args),
    /// What Hard Correction corrects: one checkpoint's predictions at masked positions, each
    /// with its gold token and the table's verdict, counts by part of speech and the most
    /// frequent pairs.
    Inspect(inspect::Args),
    /// Plot one metric of several runs side by side (PNG).
    Compare(compare::Args),
    /// Fine-tune on a GLUE task or SQuAD and report dev scores over seeds.
    Finetune(finetune::Args),
    /// Write a transformed copy of a data set (robustness attack).
    Attack(attack::Args),
    /// Evaluate a fine-tuned model on a dev set; writes predictions in GLUE's submission format.
    Evaluate(evaluate::Args),
    /// Hits (Wang et al. 2021): per layer, how often a sentence is closer to its synonym version
    /// than to its antonym version.
    Hits(hits::Args),
    /// Baseline vs another objective continued from one run: contrast consistency and Hits
    /// over seeds.
    CompareContinued(compare_continued::Args),
    /// The paper's ablation in one command: pre-train per objective and seed, HC statistics,
    /// GLUE / SQuAD fine-tuning and robustness over seeds, a report with bootstrap intervals.
    Ablation(ablation::Args),
    /// The training step's benchmark beside torch_bench.py (BERT MLM + word-level SR); prints
    /// ms_per_step=.
    Bench(bench::Args),
}

/// One subcommand: its plan, then its work inside the frame that claimed the plan's outputs.
pub trait Command {
    /// What the command reads (each path with its kind), writes and needs, and how it stops:
    /// read from the command line and small files only, writing nothing.
    fn plan(&self) -> anyhow::Result<trueneg::frame::Plan>;
    /// The work, with the outputs claimed.
    fn run(self: Box<Self>, claim: &trueneg::frame::Claim, ui: Ui) -> anyhow::Result<()>;
}

/// How the command reports progress: a bar on a terminal, plain log lines otherwise.
#[derive(Clone, Copy)]
pub struct Ui {
    pub progress: Progress,
}

impl Ui {
    /// Whether to draw progress bars.
    pub fn bars(&self) -> bool {
        self.progress == Progress::Bar
    }
}

/// A value of one of the library's lowercase-named enums (`f32`, `hc+sr`, `auto`, …), parsed
/// by its serde name.
pub fn from_name<T: serde::de::DeserializeOwned>(s: &str, expected: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.trim().to_string()))
        .map_err(|_| format!("{s}: expected {expected}"))
}

/// `--precision`: f32, bf16 or auto.
pub fn precision(s: &str) -> Result<trueneg::model::Precision, String> {
    from_name(s, "f32, bf16 or auto")
}

/// A count option of at least `min`: clap refuses anything less in one line naming the option
/// and the value, before any work.
pub fn at_least(min: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(min..)
}

/// An `objective.kind` name (`baseline`, `hc`, …), as the flags that name objectives take it.
pub fn objective_kind(s: &str) -> Result<trueneg::objective::ObjectiveKind, String> {
    use trueneg::objective::ObjectiveKind;
    ObjectiveKind::parse(s.trim()).ok_or_else(|| {
        format!(
            "{s}: not an objective (expected one of {})",
            ObjectiveKind::names()
        )
    })
}

/// A share in (0, 1] of the words `prepare --triples` replaces: each sentence with a candidate has
/// at least one word replaced on each side, so 0 would not mean "none" and is refused.
pub fn replaced_share(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        Ok(0.0) => Err(format!(
            "{s}: out of range; every sentence has at least one word replaced on each side, so 0 is not possible (expected a number in (0, 1])"
        )),
        _ => Err(format!("{s}: expected a number in (0, 1]")),
    }
}

/// The paths a pre-training config given as `--config source` (a preset or a file) with
/// `overrides` makes a command read: the file itself, and the paths its values name.
fn config_inputs(
    source: &str,
    overrides: &[String],
) -> anyhow::Result<Vec<trueneg::frame::plan::Input>> {
    use trueneg::frame::{FileKind, InputKind, plan::Input};
    let cfg = trueneg::train::config::PretrainConfig::load(source, overrides)?;
    let file = (!trueneg::train::config::is_preset(source)).then(|| Input {
        flag: "--config".into(),
        path: PathBuf::from(source),
        kind: InputKind::File(FileKind::Config),
    });
    Ok(file.into_iter().chain(cfg.inputs()).collect())
}

/// Refuses a `--set KEY=…` where the command's own `flag` decides `key`: the command would
/// otherwise override one of the two without a word.
fn set_owned_by(set: &[String], key: &str, flag: &str) -> anyhow::Result<()> {
    match set
        .iter()
        .find(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == key))
    {
        Some(s) => {
            anyhow::bail!("--set {s}: {flag} decides {key} for this command; give it there instead")
        }
        None => Ok(()),
    }
}

/// The table Hard Correction's reports on `run` use: `lexicon`, else the run's own
/// `lexicon.safetensors`, else `wordnet()` (WordNet's for the run's tokenizer `tok`, built only
/// when neither file is there).
fn run_synonym_table(
    run: &std::path::Path,
    lexicon: Option<PathBuf>,
    tok: &trueneg::text::WordPieceTokenizer,
    wordnet: impl FnOnce() -> trueneg::Result<trueneg::text::SynonymTable>,
) -> anyhow::Result<trueneg::text::SynonymTable> {
    let own = Some(run.join("lexicon.safetensors")).filter(|p| p.is_present());
    Ok(match lexicon.or(own) {
        Some(p) => trueneg::text::SynonymTable::load_for(&p, &tok.fingerprint())?,
        None => wordnet()?,
    })
}

/// The WordNet folder given, else Debian's wordnet-base.
fn wordnet_dir(path: &Option<PathBuf>) -> PathBuf {
    path.clone()
        .unwrap_or_else(trueneg::text::default_corpus::default_wordnet_dir)
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    let ui = Ui {
        progress: if cli.quiet {
            Progress::Hidden
        } else if std::io::stderr().is_terminal() {
            Progress::Bar
        } else {
            Progress::Lines
        },
    };
    let command: Box<dyn Command> = match cli.command {
        Subcommands::Prepare(a) => Box::new(a),
        Subcommands::Pretrain(a) => Box::new(a),
        Subcommands::Export(a) => Box::new(a),
        Subcommands::Lexicon { command } => Box::new(command),
        Subcommands::Stats(a) => Box::new(a),
        Subcommands::Inspect(a) => Box::new(a),
        Subcommands::Compare(a) => Box::new(a),
        Subcommands::Finetune(a) => Box::new(a),
        Subcommands::Attack(a) => Box::new(a),
        Subcommands::Evaluate(a) => Box::new(a),
        Subcommands::Hits(a) => Box::new(a),
        Subcommands::CompareContinued(a) => Box::new(a),
        Subcommands::Ablation(a) => Box::new(a),
        Subcommands::Bench(a) => Box::new(a),
    };
    let plan = command.plan()?;
    trueneg::frame::execute(&plan, |claim| command.run(claim, ui))
}
