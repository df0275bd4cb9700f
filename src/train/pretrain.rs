//! The pre-training loop: masked batches → loss → gradients (accumulated) → global-norm clip →
//! AdamW with warmup + linear decay, with metrics, progress, checkpoints and exact resume.
//!
//! Every random draw of step s (masking, dropout, generator sampling) comes from RNGs seeded
//! by (seed, s), and the data position is saved in each checkpoint, so a resumed run repeats
//! the uninterrupted one.

use crate::device::DeviceName;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::checkpoint::{self, TrainState, WindowTotals};
use super::config::PretrainConfig;
use super::fixed_step::FixedStep;
use super::heldout::HeldOut;
use super::micro_steps::{StepRun, train_step};
use super::model::PretrainModel;
use super::optimizer::AdamW;
use super::replicas::Replicas;
use super::start::{
    METRICS, RunPlace, Start, Trainee, forget_unstarted, start_point, write_run_files,
};
use super::steps::{StepAt, TrainingStep, WithStep, kind_of, with_step};
use crate::dist::Group;
use crate::objective::Setup;
use crate::objective::terms::{Pending, WindowCounts, add_counters};
use crate::text::batches::BatchStream;
use crate::text::shards::ShardSet;
use crate::{Error, Result};

pub use super::metrics::StepMetrics;
use super::run_log::{Log, LogSetup};
pub use super::run_log::{Progress, RunOptions};

/// Summary of a finished run.
pub struct RunSummary {
    pub steps: u64,
    /// `--resume` found the run already at `train.steps`: nothing was done.
    pub already_finished: bool,
    pub last: Option<StepMetrics>,
    pub run_dir: PathBuf,
}

/// Truncates `metrics.jsonl` to the lines (step lines and records) with step ≤ `step` (after a
/// resume).
fn truncate_metrics(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = crate::io::read::read_text(path, crate::io::limit::DATA) else {
        return Ok(());
    };
    let kept: String = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .is_ok_and(|v| v["step"].as_u64().is_some_and(|s| s <= step))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    crate::io::write_atomic(path, kept.as_bytes())
}

/// Refuses shards the config cannot train on (vocabulary, length, the kind of data its step
/// trains on), naming the field and the folder.
fn check_shards(cfg: &PretrainConfig, shards: &ShardSet) -> Result<()> {
    let vocab = shards.manifest.vocab_size;
    let len = shards.manifest.max_seq_len;
    let dir = shards.dir.display();
    if cfg.model.encoder.vocab_size != 0 && cfg.model.encoder.vocab_size != vocab {
        return Err(Error::Config(format!(
            "field `model.vocab_size` is {}, but the tokenizer of {dir} has {vocab} tokens; set it to {vocab}, or to 0 to take the tokenizer's size (--set model.vocab_size=0)",
            cfg.model.encoder.vocab_size,
        )));
    }
    if len > cfg.model.encoder.max_position_embeddings {
        return Err(Error::Config(format!(
            "{dir}: examples of {len} tokens exceed model.max_position_embeddings = {}",
            cfg.model.encoder.max_position_embeddings
        )));
    }
    if len != cfg.data.max_seq_len {
        return Err(Error::Config(format!(
            "field `data.max_seq_len` is {}, but the examples of {dir} have {len} tokens; set it to {len} or prepare the corpus again",
            cfg.data.max_seq_len,
        )));
    }
    let step = kind_of(cfg.objective.kind);
    if step.data() != shards.holds() {
        return Err(Error::Config(format!(
            "field `objective.kind` is {:?}: {} trains on {}, but {dir} holds {}",
            cfg.objective.kind.name(),
            step.name(),
            step.data().describe(),
            shards.holds().describe()
        )));
    }
    Ok(())
}

/// Writes replica 0's model and optimizer state, and `train`'s own state, with `state` as the
/// run's next checkpoint, keeping the last `keep`; returns its folder.
fn save_checkpoint<S: TrainingStep>(
    run: &Path,
    state: &TrainState,
    replicas: &mut Replicas,
    train: &S,
    keep: usize,
) -> Result<PathBuf> {
    let contents = checkpoint::Contents {
        model: &replicas.models[0].export(),
        optimizer: &replicas.opt.state(),
        step_state: &|dir| train.save_state(dir),
    };
    checkpoint::save(run, state, contents, keep)
}

/// The error of a run stopped by a signal after step `done`, naming its checkpoint `dir` and the
/// command that continues it.
fn interrupted(run: &Path, dir: &Path, done: u64, total: u64) -> Error {
    Error::Interrupted(format!(
        "stopped by a signal after step {done} of {total}; checkpoint {}; continue with `trueneg pretrain --resume {}`",
        dir.display(),
        run.display()
    ))
}

/// The error of a step whose loss is not finite, naming the last good checkpoint.
fn diverged(run: &Path, step: u64, loss: f64) -> Error {
    let last_good = checkpoint::list(run)
        .pop()
        .map(|(_, p)| p.display().to_string());
    Error::Diverged(format!(
        "step {step}: loss is {loss} (not finite); stopped. Last good checkpoint: {}",
        last_good.unwrap_or_else(|| "none".into())
    ))
}

pub fn pretrain(cfg: &PretrainConfig, shards: &ShardSet, opts: &RunOptions) -> Result<RunSummary> {
    pretrain_in(cfg, shards, opts, None)
}

/// [`pretrain`] as one process of a data-parallel job (`group`; `None`: a world of one). Rank
/// 0 alone writes the run's files; every rank trains on its share of each batch.
pub fn pretrain_in(
    cfg: &PretrainConfig,
    shards: &ShardSet,
    opts: &RunOptions,
    group: Option<Group>,
) -> Result<RunSummary> {
    check_shards(cfg, shards)?;
    if let Some(g) = &group {
        let run = format!(
            "build = {:?}\nshards = {:?}\n{}",
            crate::VERSION,
            shards.manifest.content_fingerprint(),
            cfg.to_toml()
        );
        g.agree("run", &run)?;
    }
    let main = group.as_ref().is_none_or(|g| g.world.is_main());
    let run = &opts.run_dir;
    let vocab = shards.manifest.vocab_size;
    let devices = cfg.replica_devices();
    let size = super::memory::StepSize {
        model: &cfg.model,
        data: &cfg.data,
        devices: &devices,
        sentences: kind_of(cfg.objective.kind).sentences_per_row(),
    };
    super::memory::check(&size, vocab)?;
    let names = process_devices(cfg, group.as_ref())?;
    let base_devices = crate::device::devices_for(&names)?;
    let device = base_devices[0].clone().autodiff();
    // The initial weights follow `train.seed`: runs of one seed start from the same weights
    // whatever their objective (the ablation's pairing).
    crate::model::seed(&base_devices[0], cfg.train.seed);
    let mut model = PretrainModel::of(&cfg.model_shape(vocab), &cfg.step_settings(), &device);
    let mut opt = AdamW::new(cfg.optimizer.clone());
    let place = RunPlace {
        run,
        resume: opts.resume,
        main,
    };
    let trainee = Trainee {
        model: &mut model,
        opt: &mut opt,
        device: &device,
    };
    let at = start_point(&cfg.model, cfg.train.steps, shards, place, trainee);
    // Every rank has read the folder before rank 0 writes to it.
    if let Some(g) = &group {
        g.barrier()?;
    }
    let start = match at? {
        Start::At(state) => state,
        Start::Finished(steps) => {
            return Ok(RunSummary {
                steps,
                already_finished: true,
                last: None,
                run_dir: run.clone(),
            });
        }
    };
    if opts.resume && main {
        super::run::warn_schedule_change(run, cfg, start.step);
        truncate_metrics(&run.join(METRICS), start.step)?;
    }
    let mut replicas = Replicas::new(model, opt, base_devices)?;
    replicas.join(group);
    replicas.broadcast_parameters()?;
    let files = if main {
        write_run_files(&cfg.to_toml(), shards, run)
    } else {
        Ok(())
    };
    let ready = Ready {
        cfg,
        shards,
        opts,
        start,
        replicas,
    };
    let r = files.and_then(|()| train_run(ready));
    if r.is_err() && !opts.resume && main {
        forget_unstarted(run);
    }
    r
}

/// The devices of this process: `train.devices` (or `train.device`); in a job of several
/// processes one device each, a GPU without an index taking the process's `LOCAL_RANK`.
fn process_devices(cfg: &PretrainConfig, group: Option<&Group>) -> Result<Vec<DeviceName>> {
    let names = cfg.replica_devices();
    let Some(g) = group else {
        return Ok(names);
    };
    if names.len() > 1 {
        return Err(Error::Config(format!(
            "field `train.devices` lists {} devices, but the launcher started {} processes: one process trains on one device (LOCAL_RANK picks the GPU); leave train.devices unset",
            names.len(),
            g.world.size
        )));
    }
    let mut name = names[0];
    if name.kind.is_gpu() && name.index.is_none() {
        name.index = Some(g.world.local_rank);
    }
    Ok(vec![name])
}

/// What a step leaves on the device for the loop to read at a logging or checkpoint step.
struct StepRead {
    /// The step just done (1-based).
    done: u64,
    micro: Vec<Pending>,
    grad_norm: Option<burn::Tensor<1>>,
    lr: f64,
}

/// A logging window: its counters on the device (read into `totals.counters` when it is read)
/// and what the host has counted.
struct Window {
    counts: WindowCounts,
    totals: WindowTotals,
}

/// Reads step `r.done`'s values and the window's counters and makes its metrics (their
/// `tokens_per_s` is the caller's, timed after this read, which waits for the device: a
/// recorded step's replay is queued without waiting, so a clock read before it would miss the
/// window's last step); a loss that is not finite stops the run (`run`'s last checkpoint is
/// named).
fn read_step<S: TrainingStep>(
    r: StepRead,
    replicas: &Replicas,
    step: &S,
    window: &mut Window,
    run: &Path,
) -> Result<StepMetrics> {
    let t = replicas.read(r.micro)?;
    let counters = replicas.read_counts(&mut window.counts)?;
    add_counters(&mut window.totals.counters, &counters);
    let loss = t.mean_loss();
    if !loss.is_finite() {
        return Err(diverged(run, r.done, loss));
    }
    let mut terms = t.logged_values();
    terms.extend(step.window_metrics(&window.totals.counters));
    Ok(StepMetrics {
        step: r.done,
        loss,
        terms,
        lr: r.lr,
        grad_norm: r
            .grad_norm
            .map_or(0.0, |n| crate::kernels::read_floats(n)[0]),
        masked: window.totals.masked,
        tokens_per_s: 0.0,
    })
}

/// What `train` is given between steps, after step `done`.
fn step_at<'a>(
    done: u64,
    replicas: &'a Replicas,
    cfg: &PretrainConfig,
    shards: &'a ShardSet,
) -> StepAt<'a> {
    StepAt {
        done,
        model: &replicas.models[0],
        device: replicas.eval_device(),
        shards,
        seed: cfg.train.seed,
        log_every: cfg.train.log_every,
        main: replicas.is_main(),
    }
}

/// `train`'s work between step `at.done` and the next (`objective::between`): its records
/// logged, and a recorded step recorded anew where the work replaced tensors it reads.
fn between_steps<S: TrainingStep>(
    train: &S,
    at: &StepAt,
    replicas: &Replicas,
    fixed: Option<&mut FixedStep>,
    log: &mut Log,
) -> Result<()> {
    let between = train.between_steps(at)?;
    if between.replaced_inputs
        && let Some(f) = fixed
    {
        f.record_anew(replicas)?;
    }
    for r in &between.records {
        log.record(at.done, r)?;
    }
    Ok(())
}

/// A run about to train: what the loop needs besides its step.
struct Ready<'a> {
    cfg: &'a PretrainConfig,
    shards: &'a ShardSet,
    opts: &'a RunOptions,
    start: TrainState,
    replicas: Replicas,
}

impl WithStep for Ready<'_> {
    type Output = RunSummary;

    fn run<S: TrainingStep>(self, step: S) -> Result<RunSummary> {
        run_steps(&step, self)
    }
}

/// The steps from `start` to `train.steps` with the run's training step: built here (its
/// objective set up with the run's shards and folder), then [`run_steps`].
fn train_run(ready: Ready) -> Result<RunSummary> {
    let (cfg, shards) = (ready.cfg, ready.shards);
    let mut setup = Setup {
        shards: Some(shards),
        run: Some(&ready.opts.run_dir),
        synonyms: None,
        read_only: !ready.replicas.is_main(),
    };
    with_step(&cfg.step_settings(), shards, &mut setup, ready)
}

/// What the run's log needs of `cfg`.
fn log_setup(cfg: &PretrainConfig) -> LogSetup {
    LogSetup {
        total_steps: cfg.train.steps,
        config_toml: cfg.to_toml(),
    }
}

/// The steps from `start` to `train.steps` with `train`: the loop, its metrics, checkpoints
/// and plot.
fn run_steps<S: TrainingStep>(train: &S, ready: Ready) -> Result<RunSummary> {
    let Ready {
        cfg,
        shards,
        opts,
        start,
        mut replicas,
    } = ready;
    let run = &opts.run_dir;
    let mut stream = BatchStream::new(shards, cfg.train.seed, cfg.data.batch_size, start.data);
    let total = cfg.train.steps;
    let main = replicas.is_main();
    let mut log = Log::open(opts, log_setup(cfg), start.step, main)?;
    let heldout = if main {
        HeldOut::open(&cfg.train, &cfg.data, shards, train)?
    } else {
        None
    };
    let settings = cfg.loop_settings();
    let mut window = Window {
        counts: WindowCounts::default(),
        totals: start.window,
    };
    let mut last = None;
    let mut fixed = FixedStep::new(&cfg.fixed_plan(), &replicas)?;
    if start.step > 0 {
        let at = step_at(start.step, &replicas, cfg, shards);
        train.restore_state(&checkpoint::dir_of(run, start.step), &at)?;
    }
    for step in start.step..total {
        let lr = cfg.optimizer.lr_at(step, total);
        let at = StepRun {
            step,
            lr,
            settings: &settings,
            stream: &mut stream,
            counts: &mut window.counts,
            fixed: fixed.as_mut(),
        };
        let outcome = train_step(train, at, &mut replicas)?;
        log.rate_tokens += outcome.tokens;
        let done = step + 1;
        let at = step_at(done, &replicas, cfg, shards);
        between_steps(train, &at, &replicas, fixed.as_mut(), &mut log)?;
        window.totals.masked += outcome.masked;
        window.totals.steps += 1;
        let stopping = replicas.any(opts.stop.is_some_and(|s| s.load(Ordering::SeqCst)))?;
        let log_now = done % cfg.train.log_every == 0 || done == total;
        let save_now = done % cfg.train.checkpoint_every == 0 || done == total || stopping;
        // The step's values are read only where a line or a checkpoint needs them (the same
        // steps on every rank): between two such steps nothing waits on the device.
        if !(log_now || save_now) {
            log.bar.inc(1);
            continue;
        }
        let read = StepRead {
            done,
            micro: outcome.micro,
            grad_norm: outcome.grad_norm,
            lr,
        };
        let mut metrics = read_step(read, &replicas, train, &mut window, run)?;
        metrics.tokens_per_s = log.tokens_per_s(); // after the read waited for the device
        if let Some(h) = heldout.as_ref().filter(|h| h.due(done)) {
            let (model, device) = replicas.eval_model();
            metrics.terms.extend(h.evaluate(&model, train, &device)?);
        }
        if log_now {
            log.line(&metrics, &train.progress(&window.totals.counters))?;
            window.totals = WindowTotals::default();
        }
        log.tick(&metrics);
        if !main && stopping && done < total {
            return Err(Error::Interrupted(format!(
                "stopped by a signal after step {done} of {total}; rank 0 wrote the checkpoint"
            )));
        }
        if main && save_now {
            let state = TrainState::new(
                done,
                stream.position,
                &shards.manifest,
                window.totals.clone(),
            );
            let keep = cfg.train.keep_checkpoints;
            let dir = save_checkpoint(run, &state, &mut replicas, train, keep)?;
            if stopping && done < total {
                log.bar.abandon();
                return Err(interrupted(run, &dir, done, total));
            }
        }
        last = Some(metrics);
    }
    log.bar.finish_and_clear();
    if main {
        super::metrics::run_loss_plot(run, &crate::objective::term_labels())?;
    }
    Ok(RunSummary {
        already_finished: false,
        steps: total,
        last,
        run_dir: run.clone(),
    })
}
