//! `trueneg pretrain`: a new run from a config, or `--resume` of a run folder.

use std::path::{Path, PathBuf};

use trueneg::text::shards::ShardSet;
use trueneg::train::config::PretrainConfig;
use trueneg::train::run::RunFolder;
use trueneg::train::run::{new_run, resume_run};
use trueneg::train::{RunOptions, pretrain_in};

use trueneg::frame::{Claim, InputKind, OutputKind, Plan};

use super::Ui;

#[derive(clap::Args)]
pub struct Args {
    /// A preset (tiny, electra-small, electra-base, bert-base, electra-base-continue,
    /// bert-base-continue, hc-acting) or a TOML file.
    #[arg(long, required_unless_present = "resume", conflicts_with = "resume")]
    config: Option<String>,
    /// Override a config value, e.g. --set train.steps=100 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Host replicas testing data parallelism in one process, e.g. --devices cpu,cpu (sets
    /// train.devices); several GPUs train as one process each under torchrun/srun/mpirun.
    #[arg(long, value_delimiter = ',', value_name = "DEVICE,...")]
    devices: Vec<String>,
    /// Run folder [default: runs/<config name>] (`--run-dir` under torchrun, whose own
    /// options take `--run` for theirs).
    #[arg(long, visible_alias = "run-dir", conflicts_with = "resume")]
    run: Option<PathBuf>,
    /// Continue the run in this folder from its last complete checkpoint.
    #[arg(long, value_name = "RUN")]
    resume: Option<PathBuf>,
    /// Under a launcher (torchrun, srun, mpirun): how long a rank waits for the others at the
    /// rendezvous and in each collective before it stops with an error.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    collective_timeout: u64,
    /// The WordNet database (a `dict` folder, or a WordNet home holding one) for the default
    /// corpus and Hard Correction's table [default: $WNHOME/dict, else Debian's wordnet-base
    /// in /usr/share/wordnet].
    #[arg(long, value_name = "DIR")]
    wordnet: Option<PathBuf>,
}

impl Args {
    /// `--set` with `--devices` as `train.devices`.
    fn overrides(&self) -> Vec<String> {
        let mut set = self.set.clone();
        if !self.devices.is_empty() {
            let names: Vec<String> = self.devices.iter().map(|d| format!("{d:?}")).collect();
            set.push(format!("train.devices=[{}]", names.join(", ")));
        }
        set
    }
}

impl super::Command for Args {
    fn plan(&self) -> anyhow::Result<Plan> {
        if !self.devices.is_empty() {
            super::set_owned_by(&self.set, "train.devices", "--devices")?;
        }
        let mut plan = Plan::new("pretrain")
            .input_if("--wordnet", self.wordnet.as_ref(), InputKind::WordNet)
            .stops_at_safe_points(
                "the run stops at its next step: what it saved continues with `trueneg pretrain --resume`",
            );
        // Under a launcher, rank 0 alone claims the run folder; the others follow it.
        let main = trueneg::dist::World::from_env()?.is_main();
        match (&self.resume, &self.config) {
            (Some(dir), _) => {
                plan = plan.input("--resume", dir, InputKind::Run);
                let file = dir.join("config.toml");
                if trueneg::io::read::is_file(&file) {
                    let cfg = PretrainConfig::load_file(&file, &self.overrides())?;
                    plan = plan.inputs(cfg.inputs());
                }
                if main {
                    plan = plan.output("--resume", dir, OutputKind::Continued);
                }
            }
            (None, Some(c)) => {
                plan = plan.inputs(super::config_inputs(c, &self.overrides())?);
                if main {
                    plan = plan.output("--run", &run_folder(self, c), OutputKind::Folder);
                }
            }
            (None, None) => unreachable!("clap requires --config or --resume"),
        }
        Ok(plan)
    }

    fn run(self: Box<Self>, claim: &Claim, ui: Ui) -> anyhow::Result<()> {
        run(*self, claim, ui)
    }
}

fn run(mut a: Args, claim: &Claim, ui: Ui) -> anyhow::Result<()> {
    if let Some(dir) = &a.wordnet {
        trueneg::text::default_corpus::choose_wordnet_dir(dir)?;
    }
    a.set = a.overrides();
    // Under a launcher, every rank joins the group before anything else; rank 0 alone claims
    // the run folder and prepares the default corpus, the others wait for it at a barrier.
    let world = trueneg::dist::World::from_env()?;
    let timeout = std::time::Duration::from_secs(a.collective_timeout.max(1));
    let group = trueneg::dist::Group::join(&world, timeout)?;
    let (cfg, run_dir, resume) = if world.is_main() {
        let folder = claimed_run(&a, claim)?;
        (folder.config, folder.dir, folder.resume)
    } else {
        if let Some(g) = &group {
            g.barrier()?;
        }
        let (cfg, dir) = follow(&a)?;
        (cfg, dir, a.resume.is_some())
    };
    let cfg = &cfg;
    // Device names, counts and kinds are checked before any work (the default corpus).
    if group.is_none() {
        trueneg::device::devices_for(&cfg.replica_devices())?;
    }
    let shards_dir = match &cfg.data.shards {
        Some(d) => d.clone(),
        None if world.is_main() => trueneg::train::default_data::ensure_default_shards(
            claim.folder(if resume { "--resume" } else { "--run" }),
            cfg,
            ui.bars(),
        )?,
        None => trueneg::train::default_data::default_shards_dir(&run_dir),
    };
    if world.is_main()
        && let Some(g) = &group
    {
        g.barrier()?;
    }
    let shards = ShardSet::open(&shards_dir)?;
    let s = pretrain_in(
        cfg,
        &shards,
        &RunOptions {
            run_dir: run_dir.clone(),
            resume,
            progress: ui.progress,
            stop: Some(trueneg::stop::flag()),
        },
        group,
    )?;
    if !world.is_main() {
        return Ok(());
    }
    if s.already_finished {
        println!(
            "{}: already finished ({} steps, train.steps = {}); nothing to do (raise it with --set train.steps=N to go on)",
            run_dir.display(),
            s.steps,
            cfg.train.steps
        );
    } else if let Some(m) = s.last {
        println!(
            "pre-trained {} steps: loss {:.4} (mlm {:.4}{}) -> {}",
            s.steps,
            m.loss,
            m.mlm_loss(),
            m.other_losses(", "),
            run_dir.display()
        );
        if let Some(((bs, best), (ls, last))) = trueneg::train::metrics::eval_losses(&run_dir) {
            println!("held-out loss: last {last:.4} (step {ls}), best {best:.4} (step {bs})");
        }
        if let Some(note) = trueneg::train::stats::run_correction_note(&run_dir)? {
            eprintln!("note: {note}");
        }
    }
    Ok(())
}

/// Rank 0 (or the only process): the run in the folder the frame claimed, new or resumed.
fn claimed_run(a: &Args, claim: &Claim) -> anyhow::Result<RunFolder> {
    Ok(match (&a.resume, &a.config) {
        (Some(_), _) => resume_run(claim.folder("--resume"), &a.set)?,
        (None, Some(c)) => new_run(config(c, &a.set)?, claim.folder("--run"))?,
        (None, None) => unreachable!("clap requires --config or --resume"),
    })
}

/// Another rank: the same config and folder as rank 0, read after rank 0 has claimed it.
fn follow(a: &Args) -> anyhow::Result<(PretrainConfig, PathBuf)> {
    Ok(match (&a.resume, &a.config) {
        (Some(dir), _) => (
            PretrainConfig::load_file(&dir.join("config.toml"), &a.set)?,
            dir.clone(),
        ),
        (None, Some(c)) => (config(c, &a.set)?, run_folder(a, c)),
        (None, None) => unreachable!("clap requires --config or --resume"),
    })
}

fn config(c: &str, set: &[String]) -> anyhow::Result<PretrainConfig> {
    let mut cfg = PretrainConfig::load(c, set)?;
    cfg.absolute_paths()?;
    Ok(cfg)
}

/// `--run`, or `runs/<config name>`.
fn run_folder(a: &Args, c: &str) -> PathBuf {
    let name = Path::new(c)
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| c.to_string());
    a.run
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(name))
}
