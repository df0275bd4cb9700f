//! One progress line per stage of a long experiment: which stage, how many there are, and an
//! ETA from the stages that actually ran in this process (reused ones cost nothing and are left
//! out of the estimate).

use std::time::Instant;

use crate::train::pretrain::Progress;

/// A fine-tuning's per-seed lines: logged when progress is shown as lines (with bars, the bars
/// say it; hidden, nothing).
pub fn seed_lines(progress: Progress) -> impl FnMut(String) {
    move |line| {
        if progress == Progress::Lines {
            tracing::info!("{line}");
        }
    }
}

pub struct Stages {
    name: &'static str,
    total: usize,
    done: usize,
    ran: usize,
    ran_seconds: f64,
    started: Option<Instant>,
    show: bool,
}

impl Stages {
    pub fn new(name: &'static str, total: usize, show: bool) -> Self {
        Self {
            name,
            total,
            done: 0,
            ran: 0,
            ran_seconds: 0.0,
            started: None,
            show,
        }
    }

    /// Announces the next stage.
    pub fn begin(&mut self, what: &str) {
        self.started = Some(Instant::now());
        if !self.show {
            return;
        }
        let eta = if self.ran == 0 {
            "?".to_string()
        } else {
            let per = self.ran_seconds / self.ran as f64;
            format!("{:.0} s", per * (self.total - self.done) as f64)
        };
        tracing::info!(
            "{} stage {}/{}: {what} (eta {eta})",
            self.name,
            self.done + 1,
            self.total
        );
    }

    /// Ends the current stage; `ran` is false when its output was already there.
    pub fn finish(&mut self, ran: bool) {
        self.done += 1;
        if ran && let Some(t) = self.started.take() {
            self.ran += 1;
            self.ran_seconds += t.elapsed().as_secs_f64();
        }
    }
}
