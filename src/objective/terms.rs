//! Loss terms and logged values by name: what one micro-batch's forward pass gives the training
//! loop, so that the loop sums, logs and plots every objective's terms without knowing them.
//!
//! A micro-batch's objective is `L = Σ_t c_t·L_t + R`: each part `c_t·L_t` (its weight
//! applied) is a [`Term`], the mean of `L_t` over its `count` units (masked positions, kept
//! positions, weighted tokens, sentences), and `R` is a term that depends on no example. Beside
//! the objective, each step names the values it logs ([`Logged`]) and the host-side counts it
//! adds to the logging window ([`Counters`]).
//!
//! **Replicas.** A micro-batch split over k replicas is one micro-batch: replica r's share of
//! part t is `(n_{t,r} / N_t)·part_{t,r}` (`N_t = Σ_r n_{t,r}`) and its share of `R` is `R / k`
//! ([`StepLoss::objective`]), so the summed gradients are the whole micro-batch's; a logged
//! mean is `Σ_r n_r·v_r / Σ_r n_r`, a logged rate `Σ_r hits_r / Σ_r of_r` ([`combine`]).

use std::collections::BTreeMap;

use burn::prelude::*;

/// A loss term of one replica's micro-batch: its mean over the replica's `count` units.
#[derive(Clone)]
pub struct Term {
    pub value: Tensor<1>,
    pub count: f64,
}

impl Term {
    pub fn new(value: Tensor<1>, count: usize) -> Self {
        Self {
            value,
            count: count as f64,
        }
    }

    /// The term times `c` (a weight of the objective), with the same count.
    pub fn times(&self, c: f64) -> Self {
        Self {
            value: self.value.clone().mul_scalar(c),
            count: self.count,
        }
    }
}

/// A value a step logs in `metrics.jsonl` under its name.
#[derive(Clone)]
pub enum Logged {
    /// A loss term before its weight: over replicas the count-weighted mean, over a step's
    /// micro-steps the mean.
    Mean(Term),
    /// `hits` right predictions out of `of`: both summed over replicas and micro-steps.
    Rate { hits: Tensor<1>, of: f64 },
    /// A vector (the weights a step used): the last micro-step's, replica 0's; logged as a
    /// number when it has one element, else as an array.
    Last(Tensor<1>),
}

/// Host-side counts (Hard Correction's mismatches and corrections, …), summed over the steps of
/// a logging window and saved with each checkpoint.
pub type Counters = BTreeMap<String, u64>;

/// Adds `b`'s counts into `a`.
pub fn add_counters(a: &mut Counters, b: &Counters) {
    for (k, v) in b {
        *a.entry(k.clone()).or_default() += v;
    }
}

/// One replica's micro-batch: the parts of its objective, still on the device, what it logs and
/// its counts.
pub struct StepLoss {
    /// The parts `c_t·L_t`, each with the count of `L_t`; see [`StepLoss::objective`].
    pub parts: Vec<Term>,
    /// `R`, a term that depends on no example (CLINE's learned-weight regulariser).
    pub shared: Option<Tensor<1>>,
    /// The logged values, in the order the step names them.
    pub logged: Vec<(&'static str, Logged)>,
    pub counters: Counters,
}

impl StepLoss {
    /// An objective of one part, `first`, logged under `name`.
    pub fn new(name: &'static str, first: Term) -> Self {
        Self {
            parts: vec![first.clone()],
            shared: None,
            logged: vec![(name, Logged::Mean(first))],
            counters: Counters::new(),
        }
    }

    /// Adds the part `weight·term` to the objective and logs `term` under `name`.
    pub fn add(&mut self, name: &'static str, term: Term, weight: f64) {
        self.parts.push(term.times(weight));
        self.log(name, Logged::Mean(term));
    }

    /// Logs `value` under `name` (no part of the objective).
    pub fn log(&mut self, name: &'static str, value: Logged) {
        self.logged.push((name, value));
    }

    /// This replica's share of the micro-batch objective over `replicas` replicas:
    /// `Σ_t (n_t / N_t)·part_t + R / replicas`, where `n_t` is this replica's count of part t
    /// and `N_t = totals[t]` the count over all replicas. The shares add up to the objective
    /// of the whole micro-batch, so the summed gradients of the replicas are its gradient
    /// whatever the split. One replica: the plain sum.
    pub fn objective(&self, totals: &[f64], replicas: usize) -> Tensor<1> {
        let share = |p: &Term, total: f64| {
            if replicas == 1 {
                p.value.clone()
            } else {
                let w = if total > 0.0 { p.count / total } else { 0.0 };
                p.value.clone().mul_scalar(w)
            }
        };
        let mut parts = self.parts.iter().zip(totals);
        let (first, total) = parts.next().expect("an objective has a term");
        let mut sum = share(first, *total);
        for (p, total) in parts {
            sum = sum + share(p, *total);
        }
        match &self.shared {
            Some(r) if replicas == 1 => sum + r.clone(),
            Some(r) => sum + r.clone().div_scalar(replicas as f64),
            None => sum,
        }
    }
}

/// Each replica's share of the micro-batch objective (see [`StepLoss::objective`]).
pub fn objectives(losses: &[StepLoss]) -> Vec<Tensor<1>> {
    objectives_of(losses, &totals(losses), losses.len())
}

/// Each term's count summed over the replicas `losses`.
pub fn totals(losses: &[StepLoss]) -> Vec<f64> {
    (0..losses[0].parts.len())
        .map(|t| losses.iter().map(|l| l.parts[t].count).sum())
        .collect()
}

/// The shares of `losses`, replicas among `replicas` in all whose terms count `totals`
/// together (processes of a data-parallel job hold a few replicas each).
pub fn objectives_of(losses: &[StepLoss], totals: &[f64], replicas: usize) -> Vec<Tensor<1>> {
    losses
        .iter()
        .map(|l| l.objective(totals, replicas))
        .collect()
}

/// The count behind each mean that `losses` log, summed over the replicas (the weights with
/// which processes' means combine).
pub fn mean_counts(losses: &[StepLoss]) -> Vec<f64> {
    (0..losses[0].logged.len())
        .filter_map(|j| match &losses[0].logged[j].1 {
            Logged::Mean(_) => Some(
                losses
                    .iter()
                    .map(|l| match &l.logged[j].1 {
                        Logged::Mean(t) => t.count,
                        _ => unreachable!("replicas log the same values"),
                    })
                    .sum(),
            ),
            _ => None,
        })
        .collect()
}

/// A logged value of one micro-step on the host, before it is combined with the step's other
/// micro-steps.
#[derive(Clone, Debug, PartialEq)]
pub enum HostValue {
    Mean(f64),
    Rate { hits: f64, of: f64 },
    Last(Vec<f64>),
}

/// Reads the replicas' `losses` and `objectives` (their shares) of one micro-step, one device
/// read per replica, and combines them: the objective summed over the replicas, each logged
/// value combined over them, and the counts. The values of one micro-step.
pub fn combine(losses: &[StepLoss], objectives: &[Tensor<1>]) -> StepValues {
    let rows: Vec<Vec<f64>> = losses
        .iter()
        .zip(objectives)
        .map(|(l, o)| {
            let mut values = vec![o.clone().inner().reshape([1])];
            for (_, v) in &l.logged {
                values.push(match v {
                    Logged::Mean(t) => t.value.clone().inner().reshape([1]),
                    Logged::Rate { hits, .. } => hits.clone().inner().reshape([1]),
                    Logged::Last(t) => t.clone().inner(),
                });
            }
            Tensor::cat(values, 0)
                .into_data()
                .convert::<f64>()
                .try_into_vec::<f64>()
                .expect("loss terms")
        })
        .collect();
    let mut out = StepValues {
        loss: rows.iter().map(|r| r[0]).sum(),
        micro_steps: 1,
        ..Default::default()
    };
    let mut at = 1;
    for (j, (name, v)) in losses[0].logged.iter().enumerate() {
        let value = match v {
            Logged::Mean(_) => {
                let count = |r: usize| match &losses[r].logged[j].1 {
                    Logged::Mean(t) => t.count,
                    _ => unreachable!("replicas log the same values"),
                };
                let mean = if rows.len() == 1 {
                    rows[0][at]
                } else {
                    let n: f64 = (0..rows.len()).map(count).sum();
                    if n > 0.0 {
                        (0..rows.len()).map(|r| rows[r][at] * count(r)).sum::<f64>() / n
                    } else {
                        0.0
                    }
                };
                at += 1;
                HostValue::Mean(mean)
            }
            Logged::Rate { .. } => {
                let of = losses
                    .iter()
                    .map(|l| match &l.logged[j].1 {
                        Logged::Rate { of, .. } => *of,
                        _ => unreachable!("replicas log the same values"),
                    })
                    .sum();
                let hits = rows.iter().map(|r| r[at]).sum();
                at += 1;
                HostValue::Rate { hits, of }
            }
            Logged::Last(t) => {
                let [n] = t.dims();
                let first = rows[0][at..at + n].to_vec();
                at += n;
                HostValue::Last(first)
            }
        };
        out.logged.push((name, value));
    }
    for l in losses {
        add_counters(&mut out.counters, &l.counters);
    }
    out
}

/// Values over one or more micro-steps, on the host: the sums a logged line is made of.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepValues {
    pub loss: f64,
    pub micro_steps: usize,
    pub logged: Vec<(&'static str, HostValue)>,
    pub counters: Counters,
}

impl StepValues {
    /// Adds later micro-steps' values: means and the loss are summed (divided by the number of
    /// micro-steps in [`StepValues::logged_values`]), rates summed, vectors replaced.
    pub fn add(&mut self, m: StepValues) {
        self.loss += m.loss;
        self.micro_steps += m.micro_steps;
        if self.logged.is_empty() {
            self.logged = m.logged;
        } else {
            for ((_, a), (_, b)) in self.logged.iter_mut().zip(m.logged) {
                match (a, b) {
                    (HostValue::Mean(a), HostValue::Mean(b)) => *a += b,
                    (HostValue::Rate { hits, of }, HostValue::Rate { hits: h, of: o }) => {
                        *hits += h;
                        *of += o;
                    }
                    (a, b) => *a = b,
                }
            }
        }
        add_counters(&mut self.counters, &m.counters);
    }

    /// The values as sums that add over processes: the loss, each mean times its count
    /// (`counts`, from [`mean_counts`]) and the count, each rate's hits and total, the
    /// vectors (of the first process only: `first`), the counters.
    pub fn sums(&self, counts: &[f64], first: bool) -> Vec<f64> {
        let mut out = vec![self.loss];
        let mut counts = counts.iter();
        for (_, v) in &self.logged {
            match v {
                HostValue::Mean(m) => {
                    let n = *counts.next().expect("a count per mean");
                    out.extend([m * n, n]);
                }
                HostValue::Rate { hits, of } => out.extend([*hits, *of]),
                HostValue::Last(v) => out.extend(v.iter().map(|x| if first { *x } else { 0.0 })),
            }
        }
        out.extend(self.counters.values().map(|&c| c as f64));
        out
    }

    /// The values of all processes from their summed [`StepValues::sums`] (this process's
    /// values give the layout).
    pub fn from_sums(&self, sums: &[f64]) -> StepValues {
        let mut at = sums.iter().copied();
        let mut next = || at.next().expect("sums of the same layout");
        let loss = next();
        let logged = self
            .logged
            .iter()
            .map(|(name, v)| {
                let v = match v {
                    HostValue::Mean(_) => {
                        let (sum, n) = (next(), next());
                        HostValue::Mean(if n > 0.0 { sum / n } else { 0.0 })
                    }
                    HostValue::Rate { .. } => HostValue::Rate {
                        hits: next(),
                        of: next(),
                    },
                    HostValue::Last(v) => HostValue::Last(v.iter().map(|_| next()).collect()),
                };
                (*name, v)
            })
            .collect();
        let counters = self
            .counters
            .keys()
            .map(|k| (k.clone(), next().round() as u64))
            .collect();
        StepValues {
            loss,
            micro_steps: self.micro_steps,
            logged,
            counters,
        }
    }

    /// The loss averaged over the micro-steps.
    pub fn mean_loss(&self) -> f64 {
        self.loss / self.micro_steps.max(1) as f64
    }

    /// The logged values as `metrics.jsonl` writes them: means over the micro-steps, rates as
    /// `hits / max(of, 1)`, vectors as they are.
    pub fn logged_values(&self) -> BTreeMap<String, serde_json::Value> {
        let k = self.micro_steps.max(1) as f64;
        self.logged
            .iter()
            .map(|(name, v)| {
                let value = match v {
                    HostValue::Mean(s) => serde_json::json!(s / k),
                    HostValue::Rate { hits, of } => serde_json::json!(hits / of.max(1.0)),
                    HostValue::Last(v) if v.len() == 1 => serde_json::json!(v[0]),
                    HostValue::Last(v) => serde_json::json!(v),
                };
                (name.to_string(), value)
            })
            .collect()
    }
}
