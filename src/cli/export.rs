//! `trueneg export`: a run's checkpoint, or a fine-tuned model, in transformers' layout.

use std::path::PathBuf;

use trueneg::frame::{Claim, InputKind, OutputKind, Plan};
use trueneg::io::outputs::Outputs;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["run", "model"])))]
pub struct Args {
    /// The run folder: its checkpoint becomes config.json + model.safetensors + the tokenizer's
    /// Hub files + README.md (ELECTRA: generator/ and discriminator/).
    #[arg(long)]
    run: Option<PathBuf>,
    /// A fine-tuned model (a `seed-N` folder of `finetune`): GLUE → *ForSequenceClassification,
    /// SQuAD → *ForQuestionAnswering.
    #[arg(long, conflicts_with = "step")]
    model: Option<PathBuf>,
    /// Checkpoint step of --run [default: the latest].
    #[arg(long)]
    step: Option<u64>,
    /// The folder to write; files an earlier `export` wrote there are replaced, others refused.
    #[arg(long)]
    out: PathBuf,
    /// Replace files in --out that `export` did not write.
    #[arg(long)]
    force: bool,
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        Ok(Plan::new("export")
            .input_if("--run", self.run.as_ref(), InputKind::Run)
            .input_if("--model", self.model.as_ref(), InputKind::Finetuned)
            .output("--out", &self.out, OutputKind::FilesIn)
            .force(self.force))
    }

    fn run(self: Box<Self>, claim: &Claim, _: super::Ui) -> anyhow::Result<()> {
        run(*self, claim.outputs())
    }
}

fn run(a: Args, outputs: &Outputs) -> anyhow::Result<()> {
    let dirs = match (&a.run, &a.model) {
        (Some(run), _) => trueneg::train::export::export_run(run, a.step, &a.out, outputs)?,
        (None, Some(model)) => vec![trueneg::finetune::export::export_finetuned(
            model, &a.out, outputs,
        )?],
        (None, None) => unreachable!("clap requires --run or --model"),
    };
    for dir in dirs {
        println!("exported {}", dir.display());
    }
    Ok(())
}
