//! `trueneg pretrain`: a new run from a config, or `--resume` of a run folder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use trueneg::text::shards::ShardSet;
use trueneg::train::run::{new_run, resume_run};
use trueneg::train::{PretrainConfig, RunOptions, pretrain};

use super::Ui;

#[derive(clap::Args)]
pub struct Args {
    /// A preset (tiny, electra-small, electra-base, bert-base) or a TOML file.
    #[arg(long, required_unless_present = "resume")]
    config: Option<String>,
    /// Override a config value, e.g. --set train.steps=100 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Data-parallel replicas, one per device, e.g. --devices cuda:0,cuda:1 (sets
    /// train.devices; with --resume, a run continues on another number of devices).
    #[arg(long, value_delimiter = ',', value_name = "DEVICE,...")]
    devices: Vec<String>,
    /// Run folder [default: runs/<config name>].
    #[arg(long, conflicts_with = "resume")]
    run: Option<PathBuf>,
    /// Continue the run in this folder from its last complete checkpoint.
    #[arg(long, value_name = "RUN")]
    resume: Option<PathBuf>,
}

/// Raised by Ctrl-C / SIGTERM: the run finishes its step, saves a checkpoint and stops.
static STOP: AtomicBool = AtomicBool::new(false);

pub fn run(mut a: Args, ui: Ui) -> anyhow::Result<()> {
    if !a.devices.is_empty() {
        let names: Vec<String> = a.devices.iter().map(|d| format!("{d:?}")).collect();
        a.set.push(format!("train.devices=[{}]", names.join(", ")));
    }
    let folder = match (&a.resume, &a.config) {
        (Some(dir), _) => resume_run(dir, &a.set)?,
        (None, Some(c)) => {
            let mut cfg = PretrainConfig::load(c, &a.set)?;
            cfg.absolute_paths()?;
            let name = Path::new(c)
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_else(|| c.clone());
            let dir = a.run.unwrap_or_else(|| PathBuf::from("runs").join(name));
            new_run(cfg, &dir)?
        }
        (None, None) => unreachable!("clap requires --config or --resume"),
    };
    let cfg = &folder.config;
    // Device names, counts and kinds are checked before any work (the default corpus).
    trueneg::device::devices_for(&cfg.replica_devices())?;
    let run_dir = folder.dir.clone();
    let shards_dir = match &cfg.data.shards {
        Some(d) => d.clone(),
        None => trueneg::train::default_data::ensure_default_shards(&run_dir, cfg, ui.bars())?,
    };
    let shards = ShardSet::open(&shards_dir)?;
    // A second signal stops at once (the checkpoints on disk are whole either way).
    ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("stopping after this step (a second Ctrl-C stops at once)");
    })?;
    let s = pretrain(
        cfg,
        &shards,
        &RunOptions {
            run_dir: run_dir.clone(),
            resume: folder.resume,
            progress: ui.progress,
            stop: Some(&STOP),
        },
    )?;
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
        if let Some(note) = trueneg::train::stats::run_correction_note(&run_dir)? {
            eprintln!("note: {note}");
        }
    }
    Ok(())
}
