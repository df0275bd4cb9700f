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
    /// A new folder for config.json + model.safetensors (ELECTRA: generator/ and discriminator/).
    #[arg(long)]
    out: PathBuf,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    for dir in trueneg::train::export::export_run(&a.run, a.step, &a.out)? {
        println!("exported {}", dir.display());
    }
    Ok(())
}
