//! Confidence intervals over seeds by the bootstrap.
//!
//! Scores come as a grid `g[p][f]`: pre-training seed p × fine-tuning seed f (one row per
//! pre-trained model). The **two-level (hierarchical) percentile bootstrap** draws, B times,
//! P rows with replacement, then within each drawn row F entries with replacement, and takes the
//! mean of the P·F drawn values; the interval at level 1 − α is the α/2 and 1 − α/2 quantiles
//! of those B means (linear interpolation between order statistics). Both sources of variance
//! (which model was pre-trained, which fine-tuning run) are resampled, as in Efron &
//! Tibshirani's nested bootstrap. A single-row grid reduces to the ordinary bootstrap.
//!
//! A **paired difference** (method − baseline on the same seeds) is the bootstrap of the grid of
//! differences: the pairs are resampled together.
//!
//! Draws come from a ChaCha8 generator with a fixed seed: the same scores give the same interval.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// A mean and its bootstrap interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
    /// Confidence level, e.g. 0.95.
    pub level: f64,
}

impl Interval {
    /// Whether 0 lies inside the interval (no evidence of a difference at this level).
    pub fn contains_zero(&self) -> bool {
        self.low <= 0.0 && 0.0 <= self.high
    }
}

/// The q-quantile (0 ≤ q ≤ 1) of sorted values, interpolated linearly.
/// What a paired difference's interval says, in words: `higher` / `lower` when the interval
/// lies on one side of 0, no evidence when it holds 0, and no verdict at all with fewer than
/// two seeds on either level (one pre-training or one fine-tuning seed gives an interval of
/// that seed's noise, not evidence).
pub fn verdict(
    interval: &Interval,
    pretrain_seeds: usize,
    finetune_seeds: usize,
    higher: &str,
    lower: &str,
) -> String {
    if pretrain_seeds < 2 || finetune_seeds < 2 {
        format!(
            "not enough seeds for an interval ({pretrain_seeds} pre-training × {finetune_seeds} fine-tuning; 2 × 2 at least)"
        )
    } else if interval.contains_zero() {
        "contains 0: no evidence of a difference".into()
    } else if interval.low > 0.0 {
        higher.into()
    } else {
        lower.into()
    }
}

/// Seed lists name each seed once: a repeated seed would count one run twice as evidence.
pub fn check_seeds(option: &str, seeds: &[u64]) -> crate::Result<()> {
    if seeds.is_empty() {
        return Err(crate::Error::Config(format!(
            "{option}: give at least one seed"
        )));
    }
    match seeds
        .iter()
        .enumerate()
        .find(|(i, s)| seeds[..*i].contains(s))
    {
        Some((_, s)) => Err(crate::Error::Config(format!(
            "{option}: seed {s} is given twice"
        ))),
        None => Ok(()),
    }
}

pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty(), "quantile of nothing");
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos.fract());
    if i + 1 < sorted.len() {
        sorted[i] + frac * (sorted[i + 1] - sorted[i])
    } else {
        sorted[i]
    }
}

/// The two-level percentile bootstrap of the grand mean of `grid` (rows: pre-training seeds,
/// entries: fine-tuning seeds), `resamples` draws, at `level`. Rows may differ in length; none
/// may be empty.
pub fn bootstrap_grid(grid: &[Vec<f64>], resamples: usize, level: f64, seed: u64) -> Interval {
    assert!(
        !grid.is_empty() && grid.iter().all(|r| !r.is_empty()),
        "a bootstrap needs at least one value per row"
    );
    let n: usize = grid.iter().map(Vec::len).sum();
    let mean = grid.iter().flatten().sum::<f64>() / n as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            let (mut sum, mut count) = (0.0, 0usize);
            for _ in 0..grid.len() {
                let row = &grid[rng.random_range(0..grid.len())];
                for _ in 0..row.len() {
                    sum += row[rng.random_range(0..row.len())];
                    count += 1;
                }
            }
            sum / count as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let alpha = 1.0 - level;
    Interval {
        mean,
        low: quantile(&means, alpha / 2.0),
        high: quantile(&means, 1.0 - alpha / 2.0),
        level,
    }
}

/// The bootstrap of `method − baseline`, paired entry by entry (same shapes).
pub fn paired_difference(
    method: &[Vec<f64>],
    baseline: &[Vec<f64>],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Interval {
    assert_eq!(method.len(), baseline.len(), "paired grids of one shape");
    let diff: Vec<Vec<f64>> = method
        .iter()
        .zip(baseline)
        .map(|(m, b)| {
            assert_eq!(m.len(), b.len(), "paired grids of one shape");
            m.iter().zip(b).map(|(x, y)| x - y).collect()
        })
        .collect();
    bootstrap_grid(&diff, resamples, level, seed)
}

/// Draws, level and seed of every interval the experiment reports print.
pub const RESAMPLES: usize = 10_000;
pub const LEVEL: f64 = 0.95;
pub const SEED: u64 = 1;

/// Mean ± sample sd of all the grid's values and the 95 % two-level interval of their mean
/// ([`RESAMPLES`] draws, seed [`SEED`]).
pub fn describe(grid: &[Vec<f64>]) -> (crate::finetune::seeds::Summary, Interval) {
    let flat: Vec<f64> = grid.iter().flatten().copied().collect();
    (
        crate::finetune::seeds::summary(&flat),
        bootstrap_grid(grid, RESAMPLES, LEVEL, SEED),
    )
}

/// [`describe`] of `method − baseline`, paired entry by entry (same shapes).
pub fn describe_difference(
    method: &[Vec<f64>],
    baseline: &[Vec<f64>],
) -> (crate::finetune::seeds::Summary, Interval) {
    let flat: Vec<f64> = method
        .iter()
        .flatten()
        .zip(baseline.iter().flatten())
        .map(|(m, b)| m - b)
        .collect();
    (
        crate::finetune::seeds::summary(&flat),
        paired_difference(method, baseline, RESAMPLES, LEVEL, SEED),
    )
}
