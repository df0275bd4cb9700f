//! How much of a step's wall time the process's threads spent on a CPU, how much runnable but
//! waiting for one (the machine's other load: a shared VM's neighbours), and the rest, idle
//! (a thread asleep while another works: a serial stretch, a parallel loop's tail, a wake-up's
//! latency). Read from Linux's per-thread scheduler statistics
//! (`/proc/self/task/*/schedstat`: nanoseconds on a CPU, nanoseconds runnable), so it separates
//! a step that idles from a machine that is busy elsewhere, which the step's time alone cannot.
//! Where the file is missing (not Linux), there is nothing to report.

use std::path::Path;
use std::time::Instant;

use crate::io::{limit, read};

/// The process's threads' scheduler totals at one instant.
#[derive(Clone, Copy)]
pub struct Mark {
    at: Instant,
    on_cpu_ns: u64,
    runnable_ns: u64,
}

impl Mark {
    /// The totals now, or `None` where the statistics cannot be read.
    pub fn now() -> Option<Self> {
        let mut on_cpu_ns = 0;
        let mut runnable_ns = 0;
        for task in read::list(Path::new("/proc/self/task")).ok()? {
            // A thread that ended since the listing has no file: it has nothing more to add.
            let Ok(text) = read::read_text(&task.join("schedstat"), limit::SMALL) else {
                continue;
            };
            let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
            on_cpu_ns += fields.next()??;
            runnable_ns += fields.next()??;
        }
        Some(Self {
            at: Instant::now(),
            on_cpu_ns,
            runnable_ns,
        })
    }

    /// The shares of `threads` threads' time from `self` to `later`.
    pub fn until(self, later: Self, threads: usize) -> Occupancy {
        let wall_ns = later.at.duration_since(self.at).as_nanos() as f64;
        Occupancy::of(
            wall_ns * threads.max(1) as f64,
            later.on_cpu_ns.saturating_sub(self.on_cpu_ns),
            later.runnable_ns.saturating_sub(self.runnable_ns),
        )
    }
}

/// Shares of the threads' time over a stretch (each 0–1; they sum to about 1).
#[derive(Clone, Copy, Debug, Default)]
pub struct Occupancy {
    /// On a CPU (a spinning wait counts here).
    pub on_cpu: f64,
    /// Runnable, waiting for a CPU the machine gave to something else.
    pub waiting: f64,
    /// Asleep: nothing to do.
    pub idle: f64,
}

impl Occupancy {
    /// The shares of `capacity_ns` (a stretch's wall time × its threads) spent on a CPU and
    /// runnable; idle is what remains (none where the two fill it: the process's other
    /// threads can add a little over the threads counted).
    pub fn of(capacity_ns: f64, on_cpu_ns: u64, runnable_ns: u64) -> Occupancy {
        let share = |ns: u64| ns as f64 / capacity_ns;
        let (on_cpu, waiting) = (share(on_cpu_ns), share(runnable_ns));
        Occupancy {
            on_cpu,
            waiting,
            idle: (1.0 - on_cpu - waiting).max(0.0),
        }
    }

    /// The median of each share over `stretches`.
    pub fn median(stretches: &[Occupancy]) -> Option<Occupancy> {
        if stretches.is_empty() {
            return None;
        }
        let of = |f: fn(&Occupancy) -> f64| {
            let values: Vec<f64> = stretches.iter().map(f).collect();
            super::stats::median(&values)
        };
        Some(Occupancy {
            on_cpu: of(|o| o.on_cpu),
            waiting: of(|o| o.waiting),
            idle: of(|o| o.idle),
        })
    }
}
