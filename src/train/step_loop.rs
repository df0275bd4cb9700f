//! The loop of a run's steps: masked batches → loss → gradients (accumulated) → global-norm
//! clip → AdamW on the run's one schedule, with metrics, progress, held-out evaluations and
//! checkpoints; phase by phase (`train::phases`), each phase's training step built for its
//! length and the model, optimizer, log and metrics window carried from one to the next.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::checkpoint::{self, TrainState, WindowTotals};
use super::config::PretrainConfig;
use super::fixed_step::FixedStep;
use super::heldout::HeldOut;
use super::metrics::StepMetrics;
use super::micro_steps::{StepRun, train_step};
use super::phases::{Phase, PhaseShards};
use super::replicas::Replicas;
use super::run_log::{Log, LogSetup, RunOptions};
use super::steps::{StepAt, TrainingStep, WithStep, with_step};
use crate::objective::Setup;
use crate::objective::terms::{Pending, WindowCounts, add_counters};
use crate::text::batches::{BatchStream, DataPosition};
use crate::text::shards::ShardSet;
use crate::{Error, Result};

/// Summary of a finished run.
pub struct RunSummary {
    pub steps: u64,
    /// `--resume` found the run already at `train.steps`: nothing was done.
    pub already_finished: bool,
    pub last: Option<StepMetrics>,
    pub run_dir: PathBuf,
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

/// A run about to train: its config, corpora and folder, where it starts (`start`, in
/// `phase`) and its replicas (model and optimizer loaded).
pub struct Ready<'a> {
    pub cfg: &'a PretrainConfig,
    pub shards: &'a PhaseShards<'a>,
    pub opts: &'a RunOptions,
    pub phase: Phase,
    pub start: TrainState,
    pub replicas: Replicas,
}

/// What the loop carries from one phase to the next.
struct Carried {
    replicas: Replicas,
    log: Log,
    window: Window,
    last: Option<StepMetrics>,
}

/// One phase's steps, `start.step` to `end`, with the phase's config `phase_cfg`.
struct PhaseSteps<'a> {
    cfg: &'a PretrainConfig,
    phase_cfg: &'a PretrainConfig,
    shards: &'a PhaseShards<'a>,
    phase: Phase,
    opts: &'a RunOptions,
    start: TrainState,
    end: u64,
    carried: Carried,
}

impl WithStep for PhaseSteps<'_> {
    type Output = Carried;

    fn run<S: TrainingStep>(self, step: S) -> Result<Carried> {
        run_phase(&step, self)
    }
}

/// The run's steps from `ready.start` to `train.steps`, phase after phase: each phase's step
/// built (its objective set up with the phase's corpus and the run's folder) and run by
/// [`run_phase`]; the second phase starts its corpus from the beginning, with the state the
/// first left.
pub fn train_run(ready: Ready) -> Result<RunSummary> {
    let Ready {
        cfg,
        shards,
        opts,
        mut phase,
        mut start,
        replicas,
    } = ready;
    let main = replicas.is_main();
    let setup = LogSetup {
        total_steps: cfg.train.steps,
        config_toml: cfg.to_toml(),
    };
    let mut carried = Carried {
        log: Log::open(opts, setup, start.step, main)?,
        window: Window {
            counts: WindowCounts::default(),
            totals: start.window.clone(),
        },
        replicas,
        last: None,
    };
    loop {
        let phase_cfg = cfg.in_phase(phase);
        let end = match phase {
            Phase::First => cfg.phase2_start(),
            Phase::Second => cfg.train.steps,
        };
        let phase_shards = shards.of(phase);
        let mut setup = Setup {
            shards: Some(phase_shards),
            run: Some(&opts.run_dir),
            synonyms: None,
            read_only: !main,
        };
        let work = PhaseSteps {
            cfg,
            phase_cfg: &phase_cfg,
            shards,
            phase,
            opts,
            start,
            end,
            carried,
        };
        carried = with_step(&phase_cfg.step_settings(), phase_shards, &mut setup, work)?;
        if end >= cfg.train.steps {
            break;
        }
        // Rank 0 wrote the phase's last checkpoint, which the next phase's step restores.
        carried.replicas.any(false)?;
        phase = Phase::Second;
        let second = shards.of(phase);
        start = TrainState::new(
            end,
            DataPosition::default(),
            &second.manifest,
            carried.window.totals.clone(),
        );
        if main {
            tracing::info!(
                "step {end}: the second phase begins: {}-token sequences, up to {} masked positions each, from {}",
                second.manifest.max_seq_len,
                cfg.in_phase(phase).masking.max_predictions,
                second.dir.display()
            );
        }
    }
    carried.log.bar.finish_and_clear();
    if main {
        super::metrics::run_loss_plot(&opts.run_dir, &crate::objective::term_labels())?;
    }
    Ok(RunSummary {
        already_finished: false,
        steps: cfg.train.steps,
        last: carried.last,
        run_dir: opts.run_dir.clone(),
    })
}

/// The steps of one phase with `train`: the loop, its metrics, held-out evaluations and
/// checkpoints (one at the phase's end, from which the next phase's step restores its state).
fn run_phase<S: TrainingStep>(train: &S, p: PhaseSteps) -> Result<Carried> {
    let PhaseSteps {
        cfg,
        phase_cfg,
        shards,
        phase,
        opts,
        start,
        end,
        mut carried,
    } = p;
    let run = &opts.run_dir;
    let phase_shards = shards.of(phase);
    let batch_size = phase_cfg.data.batch_size;
    let mut stream = BatchStream::new(phase_shards, cfg.train.seed, batch_size, start.data);
    let total = cfg.train.steps;
    let main = carried.replicas.is_main();
    // The held-out text keeps the first phase's length, so that its figures form one curve.
    let heldout = if main {
        HeldOut::open(&cfg.train, &cfg.data, shards.first, train)?
    } else {
        None
    };
    let settings = phase_cfg.loop_settings();
    let mut fixed = FixedStep::new(&phase_cfg.fixed_plan(), &carried.replicas)?;
    if start.step > 0 {
        let at = step_at(start.step, &carried.replicas, cfg, phase_shards);
        train.restore_state(&checkpoint::dir_of(run, start.step), &at)?;
    }
    let Carried {
        replicas,
        log,
        window,
        last,
    } = &mut carried;
    for step in start.step..end {
        let lr = cfg.optimizer.lr_at(step, total);
        let at = StepRun {
            step,
            lr,
            settings: &settings,
            stream: &mut stream,
            counts: &mut window.counts,
            fixed: fixed.as_mut(),
        };
        let outcome = train_step(train, at, replicas)?;
        log.rate_tokens += outcome.tokens;
        let done = step + 1;
        let at = step_at(done, replicas, cfg, phase_shards);
        between_steps(train, &at, replicas, fixed.as_mut(), log)?;
        window.totals.masked += outcome.masked;
        window.totals.steps += 1;
        let stopping = replicas.any(opts.stop.is_some_and(|s| s.load(Ordering::SeqCst)))?;
        let log_now = done % cfg.train.log_every == 0 || done == total;
        let save_now = done % cfg.train.checkpoint_every == 0 || done == end || stopping;
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
        let mut metrics = read_step(read, replicas, train, window, run)?;
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
                &phase_shards.manifest,
                window.totals.clone(),
            );
            let keep = cfg.train.keep_checkpoints;
            let dir = save_checkpoint(run, &state, replicas, train, keep)?;
            if stopping && done < total {
                log.bar.abandon();
                return Err(interrupted(run, &dir, done, total));
            }
        }
        *last = Some(metrics);
    }
    Ok(carried)
}
