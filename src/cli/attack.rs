//! `trueneg attack`: a transformed copy of a data set (robustness attack).

use std::path::PathBuf;

use trueneg::attack::AttackKind;
use trueneg::frame::{Claim, InputKind, OutputKind, Plan};

#[derive(clap::Args)]
pub struct Args {
    /// swap-syn-wordnet (GLUE, SQuAD) or add-sent-diverse (SQuAD).
    #[arg(long)]
    kind: String,
    /// A GLUE task (cola, sst2, …) or squad.
    #[arg(long)]
    task: String,
    /// The task's folder, or one file.
    #[arg(long)]
    data: PathBuf,
    /// A new folder for the transformed files.
    #[arg(long)]
    out: PathBuf,
    /// Seed of the attack's random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// WordNet database folder [default: Debian's wordnet-base, /usr/share/wordnet].
    #[arg(long)]
    wordnet: Option<PathBuf>,
}

pub fn attack_kind(kind: &str) -> anyhow::Result<AttackKind> {
    AttackKind::parse(kind).ok_or_else(|| {
        anyhow::anyhow!("--kind {kind}: expected swap-syn-wordnet or add-sent-diverse")
    })
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        Ok(Plan::new("attack")
            .input("--data", &self.data, InputKind::TaskData)
            .input_if("--wordnet", self.wordnet.as_ref(), InputKind::WordNet)
            .output("--out", &self.out, OutputKind::Folder))
    }

    fn run(self: Box<Self>, _: &Claim, _: super::Ui) -> anyhow::Result<()> {
        run(*self)
    }
}

fn run(a: Args) -> anyhow::Result<()> {
    let kind = attack_kind(&a.kind)?;
    let task = super::finetune::task(&a.task)?;
    let wn = trueneg::lexicon::wordnet::WordNet::open(&super::wordnet_dir(&a.wordnet))?;
    for f in trueneg::attack::files::write_attacked(kind, task, &a.data, &a.out, &wn, a.seed)? {
        println!("wrote {}", f.display());
    }
    Ok(())
}
