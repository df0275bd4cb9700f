//! A run's log: `metrics.jsonl` (a line per logged step, and the records of what was done
//! between steps), the TensorBoard event file beside it, and the progress bar or plain log
//! lines with tokens/s and the ETA.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::metrics::StepMetrics;
use super::start::METRICS;
use crate::objective::Record;
use crate::{Error, Result};

/// How a run reports progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// A progress bar (an interactive terminal).
    Bar,
    /// One plain `tracing` line per `train.log_every` (step, losses, tokens/s, ETA): for logs,
    /// CI, `nohup`, cluster jobs.
    Lines,
    Hidden,
}

pub struct RunOptions {
    pub run_dir: PathBuf,
    pub resume: bool,
    pub progress: Progress,
    /// Raised by a signal handler: the run finishes its step, writes a checkpoint and stops
    /// with [`Error::Interrupted`].
    pub stop: Option<&'static AtomicBool>,
}

/// `h:mm:ss` for an ETA.
fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Progress of a run: `metrics.jsonl` lines, the bar or plain log lines, tokens/s over the
/// steps of this process since the previous line.
pub struct Log {
    /// `metrics.jsonl` (rank 0 only: the other ranks of a job write nothing).
    file: Option<crate::io::File>,
    /// The TensorBoard event file beside it (rank 0 only).
    events: Option<crate::tensorboard::EventWriter>,
    path: PathBuf,
    pub bar: ProgressBar,
    lines: bool,
    total: u64,
    start_step: u64,
    run_start: Instant,
    pub rate_tokens: usize,
    rate_start: Instant,
}

/// What a run's log needs of its config: the steps it runs to, and the config as TOML (shown in
/// TensorBoard).
pub struct LogSetup {
    pub total_steps: u64,
    pub config_toml: String,
}

impl Log {
    pub fn open(opts: &RunOptions, setup: LogSetup, start_step: u64, main: bool) -> Result<Self> {
        let total = setup.total_steps;
        let path = opts.run_dir.join(METRICS);
        let (file, events) = if main {
            let f = crate::io::write::append(&path)?;
            let events = super::events::open(&opts.run_dir, opts.resume, &setup.config_toml)?;
            (Some(f), Some(events))
        } else {
            (None, None)
        };
        let bar = if opts.progress == Progress::Bar && main {
            ProgressBar::new(total)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template("pretrain {bar:30} {pos}/{len} steps  {msg}  eta {eta}")
                .expect("template"),
        );
        bar.set_position(start_step);
        Ok(Self {
            file,
            events,
            path,
            bar,
            lines: opts.progress == Progress::Lines && main,
            total,
            start_step,
            run_start: Instant::now(),
            rate_tokens: 0,
            rate_start: Instant::now(),
        })
    }

    pub fn tokens_per_s(&self) -> f64 {
        self.rate_tokens as f64 / self.rate_start.elapsed().as_secs_f64().max(1e-9)
    }

    /// Writes `m` as a `metrics.jsonl` line and starts a new window; in line mode also a plain
    /// log line with every loss term and the objective's `note` (its parts' window counts).
    pub fn line(&mut self, m: &StepMetrics, note: &str) -> Result<()> {
        if let Some(file) = &mut self.file {
            let line = serde_json::to_string(m).expect("json");
            writeln!(file, "{line}").map_err(|e| Error::io(&self.path, e))?;
            file.flush().map_err(|e| Error::io(&self.path, e))?;
        }
        if let Some(events) = &mut self.events {
            events.scalars(m.step, &super::events::scalars(m))?;
        }
        if self.lines {
            let (done, total) = (m.step, self.total);
            let per_step = self.run_start.elapsed().as_secs_f64() / (done - self.start_step) as f64;
            tracing::info!(
                "step {done}/{total}  loss {:.4}  mlm {:.4}{}{note}  lr {:.3e}  {:.0} tok/s  eta {}",
                m.loss,
                m.mlm_loss(),
                m.other_losses("  "),
                m.lr,
                m.tokens_per_s,
                clock((total - done) as f64 * per_step)
            );
        }
        self.rate_tokens = 0;
        self.rate_start = Instant::now();
        Ok(())
    }

    /// Writes `r`, done after step `step`, as a `metrics.jsonl` record with its TensorBoard
    /// events, and its note as a log line.
    pub fn record(&mut self, step: u64, r: &Record) -> Result<()> {
        let line = r.line(step);
        if let Some(file) = &mut self.file {
            writeln!(file, "{line}").map_err(|e| Error::io(&self.path, e))?;
            file.flush().map_err(|e| Error::io(&self.path, e))?;
        }
        if let Some(events) = &mut self.events {
            super::events::write_record(events, &line)?;
        }
        if r.warning {
            tracing::warn!("step {step}  {}", r.note);
        } else if self.lines {
            tracing::info!("step {step}  {}", r.note);
        } else if !self.bar.is_hidden() {
            self.bar.println(format!("step {step}  {}", r.note));
        }
        Ok(())
    }

    pub fn tick(&self, m: &StepMetrics) {
        self.bar
            .set_message(format!("loss {:.4}  {:.0} tok/s", m.loss, m.tokens_per_s));
        self.bar.inc(1);
    }
}
