//! `trueneg export`: a run's checkpoint in transformers' layout.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The run folder.
    #[arg(long)]
    run: PathBuf,
    /// Checkpoint step [default: the latest].
    #[arg(long)]
    step: Option<u64>,
    /// The folder for config.json + model.safetensors + tokenizer.json (ELECTRA: generator/ and
    /// discriminator/); files an earlier `export` wrote there are replaced, others refused.
    #[arg(long)]
    out: PathBuf,
    /// Replace files in --out that `export` did not write.
    #[arg(long)]
    force: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let outputs = trueneg::output::Outputs::new("export", a.force);
    for dir in trueneg::train::export::export_run(&a.run, a.step, &a.out, &outputs)? {
        println!("exported {}", dir.display());
    }
    Ok(())
}
