//! Loss terms and logged values by name: what one micro-batch's forward pass gives the training
//! loop, so that the loop sums, logs and plots every objective's terms without knowing them.
//!
//! A micro-batch's objective is `L = Σ_t c_t·L_t + R`: each part `c_t·L_t` (its weight
//! applied) is a [`Term`], the mean of `L_t` over its `count` units (masked positions, kept
//! positions, weighted tokens, sentences), and `R` is a term that depends on no example. Beside
//! the objective, each step names the values it logs ([`Logged`]) and the counts it adds to the
//! logging window ([`StepLoss::counters`], on the device; [`Counters`] once read).
//!
//! **No reads in the step.** Everything a step logs stays on the device until the loop asks
//! for it: [`pending`] detaches a micro-step's values ([`Pending`]), [`Pending::read`] reads
//! them (one read per replica), [`WindowCounts`] sums the counters over a logging window on
//! the device. A count only the device knows ([`Count::Device`]: the positions Hard Correction
//! keeps) is read only where replicas need it for their shares.
//!
//! **Replicas.** A micro-batch split over k replicas is one micro-batch: replica r's share of
//! part t is `(n_{t,r} / N_t)·part_{t,r}` (`N_t = Σ_r n_{t,r}`) and its share of `R` is `R / k`
//! ([`StepLoss::objective`]), so the summed gradients are the whole micro-batch's; a logged
//! mean is `Σ_r n_r·v_r / Σ_r n_r`, a logged rate `Σ_r hits_r / Σ_r of_r` ([`combine`]).

use std::collections::BTreeMap;

use burn::prelude::*;

/// How many units a term averages over: known on the host (masked positions, real tokens), or
/// counted on the device (the positions a part keeps) and read only where it is needed: the
/// shares of several replicas, a mean combined over processes.
#[derive(Clone)]
pub enum Count {
    Host(f64),
    Device(Box<Tensor<1>>),
}

impl Count {
    /// The count on the host (one device read for [`Count::Device`]).
    pub fn value(&self) -> f64 {
        match self {
            Count::Host(n) => *n,
            Count::Device(t) => crate::kernels::read_floats(*t.clone())[0],
        }
    }

    /// The count as a `[1]` tensor on `device` (a host count is uploaded; nothing is read).
    fn tensor(&self, device: &Device) -> Tensor<1> {
        match self {
            Count::Host(n) => Tensor::from_floats([*n as f32], device),
            Count::Device(t) => t.clone().detach().to_device(device),
        }
    }

    /// The same count without autodiff (device counts are plain values).
    fn detached(&self) -> Self {
        match self {
            Count::Host(n) => Count::Host(*n),
            Count::Device(t) => Count::Device(Box::new(t.clone().detach())),
        }
    }
}

/// A loss term of one replica's micro-batch: its mean over the replica's `count` units.
#[derive(Clone)]
pub struct Term {
    pub value: Tensor<1>,
    pub count: Count,
}

impl Term {
    pub fn new(value: Tensor<1>, count: usize) -> Self {
        Self {
            value,
            count: Count::Host(count as f64),
        }
    }

    /// A term over `count` units, known on the host or counted on the device.
    pub fn with(value: Tensor<1>, count: Count) -> Self {
        Self { value, count }
    }

    /// A term whose count the device holds (`[1]`, e.g. the sum of its weights).
    pub fn counted(value: Tensor<1>, count: Tensor<1>) -> Self {
        Self {
            value,
            count: Count::Device(Box::new(count)),
        }
    }

    /// The term times `c` (a weight of the objective), with the same count.
    pub fn times(&self, c: f64) -> Self {
        Self {
            value: self.value.clone().mul_scalar(c),
            count: self.count.clone(),
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
    Rate { hits: Tensor<1>, of: Count },
    /// A vector (the weights a step used): the last micro-step's, replica 0's; logged as a
    /// number when it has one element, else as an array.
    Last(Tensor<1>),
}

/// Counts (Hard Correction's mismatches and corrections, …) on the host, summed over the steps
/// of a logging window and saved with each checkpoint.
pub type Counters = BTreeMap<String, u64>;

/// Counts of one micro-batch by name, each a `[1]` integer tensor on the device.
pub type DeviceCounters = Vec<(String, Tensor<1, Int>)>;

/// Adds `b`'s counts into `a`.
pub fn add_counters(a: &mut Counters, b: &Counters) {
    for (k, v) in b {
        *a.entry(k.clone()).or_default() += v;
    }
}

/// Adds `b`'s device counts into `a` (same names: added on the device; new names: appended).
pub fn add_device_counters(a: &mut DeviceCounters, b: DeviceCounters) {
    for (k, v) in b {
        match a.iter_mut().find(|(n, _)| *n == k) {
            Some((_, t)) => {
                let v = v.to_device(&t.device());
                *t = t.clone() + v;
            }
            None => a.push((k, v)),
        }
    }
}

/// The counters of a logging window, summed on the device step by step and read when the
/// window's line is written (or a checkpoint saves them).
#[derive(Default)]
pub struct WindowCounts {
    counts: DeviceCounters,
}

impl WindowCounts {
    pub fn add(&mut self, step: DeviceCounters) {
        add_device_counters(&mut self.counts, step);
    }

    /// The window's counts so far, read (one device read) and reset.
    pub fn take(&mut self) -> Counters {
        let counts = std::mem::take(&mut self.counts);
        read_counters(counts)
    }
}

/// Reads `counts` in one device read.
fn read_counters(counts: DeviceCounters) -> Counters {
    if counts.is_empty() {
        return Counters::new();
    }
    let device = counts[0].1.device();
    let (names, values): (Vec<String>, Vec<_>) = counts
        .into_iter()
        .map(|(k, v)| (k, v.to_device(&device)))
        .unzip();
    let host = crate::kernels::host_ids(Tensor::cat(values, 0));
    names
        .into_iter()
        .zip(host)
        .map(|(k, v)| (k, v as u64))
        .collect()
}

/// One replica's micro-batch: the parts of its objective, still on the device, what it logs and
/// its counts.
pub struct StepLoss {
    /// The parts `c_t·L_t`, each with the count of `L_t`; see [`StepLoss::objective`].
    pub parts: Vec<Term>,
    /// `R`, a term that depends on no example (the regulariser of learned loss weights).
    pub shared: Option<Tensor<1>>,
    /// The logged values, in the order the step names them.
    pub logged: Vec<(&'static str, Logged)>,
    /// The counts this micro-batch adds to the logging window, on the device.
    pub counters: DeviceCounters,
}

impl StepLoss {
    /// An objective of one part, `first`, logged under `name`.
    pub fn new(name: &'static str, first: Term) -> Self {
        Self {
            parts: vec![first.clone()],
            shared: None,
            logged: vec![(name, Logged::Mean(first))],
            counters: DeviceCounters::new(),
        }
    }

    /// Adds the part `weight·term` to the objective and logs `term` under `name`.
    pub fn add(&mut self, name: &'static str, term: Term, weight: f64) {
        self.parts.push(term.times(weight));
        self.log(name, Logged::Mean(term));
    }

    /// Adds `value` (`[1]`, on the device) to the window's counter `name`.
    pub fn count(&mut self, name: &str, value: Tensor<1, Int>) {
        add_device_counters(&mut self.counters, vec![(name.to_string(), value)]);
    }

    /// Logs `value` under `name` (no part of the objective).
    pub fn log(&mut self, name: &'static str, value: Logged) {
        self.logged.push((name, value));
    }

    /// This replica's share of the micro-batch objective over `replicas` replicas:
    /// `Σ_t (n_t / N_t)·part_t + R / replicas`, where `n_t` is this replica's count of part t
    /// and `N_t = totals[t]` the count over all replicas ([`totals`], on the device: nothing is
    /// read). The shares add up to the objective of the whole micro-batch, so the summed
    /// gradients of the replicas are its gradient whatever the split. One replica (`totals`
    /// `None`): the plain sum.
    pub fn objective(&self, totals: Option<&Tensor<1>>, replicas: usize) -> Tensor<1> {
        let share = |t: usize, p: &Term| match totals {
            None => p.value.clone(),
            Some(all) => {
                let device = p.value.device();
                let total = all.clone().slice(t..t + 1).to_device(&device);
                // Counts are whole numbers: N_t = 0 means n_t = 0, and the share is 0.
                p.value.clone() * (p.count.tensor(&device) / total.clamp_min(1.0))
            }
        };
        let mut sum = share(0, &self.parts[0]);
        for (t, p) in self.parts.iter().enumerate().skip(1) {
            sum = sum + share(t, p);
        }
        match &self.shared {
            Some(r) if totals.is_none() => sum + r.clone(),
            Some(r) => sum + r.clone().div_scalar(replicas as f64),
            None => sum,
        }
    }
}

/// Each replica's share of the micro-batch objective (see [`StepLoss::objective`]). Nothing is
/// read: several replicas' counts are summed on the first one's device.
pub fn objectives(losses: &[StepLoss]) -> Vec<Tensor<1>> {
    if losses.len() == 1 {
        return vec![losses[0].objective(None, 1)];
    }
    let device = losses[0].parts[0].value.device();
    objectives_of(losses, &totals(losses, &device), losses.len())
}

/// Each term's count summed over the replicas `losses`: a `[terms]` tensor on `device`.
pub fn totals(losses: &[StepLoss], device: &Device) -> Tensor<1> {
    let per_term = (0..losses[0].parts.len())
        .map(|t| {
            let counts = losses.iter().map(|l| l.parts[t].count.tensor(device));
            counts.reduce(|a, b| a + b).expect("at least one replica")
        })
        .collect();
    Tensor::cat(per_term, 0)
}

/// The shares of `losses`, replicas among `replicas` in all whose terms count `totals`
/// together (processes of a data-parallel job hold a few replicas each).
pub fn objectives_of(losses: &[StepLoss], totals: &Tensor<1>, replicas: usize) -> Vec<Tensor<1>> {
    losses
        .iter()
        .map(|l| l.objective(Some(totals), replicas))
        .collect()
}

/// What a logged value is, for reading it back.
#[derive(Clone, Copy)]
enum Kind {
    Mean,
    /// `device`: its total is read with the values (a device count).
    Rate {
        device: bool,
    },
    Last(usize),
}

/// One replica's logged values of one micro-step: its objective share and values in one
/// vector on the device, with the counts behind its means and the totals of its rates.
#[derive(Clone)]
struct ReplicaValues {
    row: Tensor<1>,
    counts: Vec<Count>,
    of: Vec<Count>,
}

/// One micro-step's logged values over this process's replicas, detached and still on the
/// device: [`Pending::read`] reads them. A copy shares the device memory (a recorded step's
/// outputs, rewritten by each replay).
#[derive(Clone)]
pub struct Pending {
    names: Vec<&'static str>,
    kinds: Vec<Kind>,
    replicas: Vec<ReplicaValues>,
    /// The micro-step's counters, summed over the replicas on the device.
    pub counters: DeviceCounters,
}

/// The replicas' `losses` and `objectives` (their shares) of one micro-step, detached, on the
/// device (nothing is read).
pub fn pending(losses: &[StepLoss], objectives: &[Tensor<1>]) -> Pending {
    let first = &losses[0].logged;
    let kinds = first
        .iter()
        .map(|(_, v)| match v {
            Logged::Mean(_) => Kind::Mean,
            Logged::Rate { of, .. } => Kind::Rate {
                device: matches!(of, Count::Device(_)),
            },
            Logged::Last(t) => Kind::Last(t.dims()[0]),
        })
        .collect();
    let replicas = losses
        .iter()
        .zip(objectives)
        .map(|(l, o)| {
            let mut values = vec![o.clone().inner().reshape([1])];
            let (mut counts, mut of) = (Vec::new(), Vec::new());
            for (_, v) in &l.logged {
                values.push(match v {
                    Logged::Mean(t) => {
                        counts.push(t.count.detached());
                        t.value.clone().inner().reshape([1])
                    }
                    Logged::Rate { hits, of: n } => {
                        of.push(n.detached());
                        let hits = hits.clone().inner().reshape([1]);
                        match n {
                            Count::Device(t) => {
                                Tensor::cat(vec![hits, t.clone().inner().reshape([1])], 0)
                            }
                            Count::Host(_) => hits,
                        }
                    }
                    Logged::Last(t) => t.clone().inner(),
                });
            }
            ReplicaValues {
                row: Tensor::cat(values, 0),
                counts,
                of,
            }
        })
        .collect();
    let mut counters = DeviceCounters::new();
    for l in losses {
        add_device_counters(&mut counters, l.counters.clone());
    }
    Pending {
        names: first.iter().map(|(n, _)| *n).collect(),
        kinds,
        replicas,
        counters,
    }
}

/// Reads the replicas' `losses` and `objectives` of one micro-step and combines them
/// ([`Pending::read`]).
pub fn combine(losses: &[StepLoss], objectives: &[Tensor<1>]) -> StepValues {
    pending(losses, objectives).read()
}

impl Pending {
    /// The count behind each logged mean, summed over the replicas (the weights with which
    /// processes' means combine; a device count is read).
    pub fn mean_counts(&self) -> Vec<f64> {
        let n = self.replicas[0].counts.len();
        (0..n)
            .map(|j| self.replicas.iter().map(|r| r.counts[j].value()).sum())
            .collect()
    }

    /// Reads the values (one device read per replica, the counters with replica 0's) and
    /// combines them: the objective summed over the replicas, each logged value combined over
    /// them (a mean weighted by the replicas' counts, a rate's hits and totals summed, a
    /// vector: replica 0's), and the counters.
    pub fn read(self) -> StepValues {
        let Pending {
            names,
            kinds,
            replicas,
            counters,
        } = self;
        let n_counters = counters.len();
        let rows: Vec<Vec<f64>> = replicas
            .iter()
            .enumerate()
            .map(|(r, v)| {
                let mut row = v.row.clone();
                if r == 0 && n_counters > 0 {
                    let device = row.device();
                    let c: Vec<Tensor<1>> = counters
                        .iter()
                        .map(|(_, t)| t.clone().to_device(&device).float())
                        .collect();
                    row = Tensor::cat(vec![row, Tensor::cat(c, 0)], 0);
                }
                crate::kernels::read_floats(row)
            })
            .collect();
        let mut out = StepValues {
            loss: rows.iter().map(|r| r[0]).sum(),
            micro_steps: 1,
            ..Default::default()
        };
        let (mut at, mut mean, mut rate) = (1, 0, 0);
        for (name, kind) in names.into_iter().zip(kinds) {
            let value = match kind {
                Kind::Mean => {
                    let v = if rows.len() == 1 {
                        rows[0][at]
                    } else {
                        let counts: Vec<f64> =
                            replicas.iter().map(|r| r.counts[mean].value()).collect();
                        let n: f64 = counts.iter().sum();
                        if n > 0.0 {
                            (0..rows.len())
                                .map(|r| rows[r][at] * counts[r])
                                .sum::<f64>()
                                / n
                        } else {
                            0.0
                        }
                    };
                    mean += 1;
                    at += 1;
                    HostValue::Mean(v)
                }
                Kind::Rate { device } => {
                    let hits = rows.iter().map(|r| r[at]).sum();
                    let of = if device {
                        rows.iter().map(|r| r[at + 1]).sum()
                    } else {
                        replicas.iter().map(|r| r.of[rate].value()).sum()
                    };
                    rate += 1;
                    at += 1 + device as usize;
                    HostValue::Rate { hits, of }
                }
                Kind::Last(n) => {
                    let first = rows[0][at..at + n].to_vec();
                    at += n;
                    HostValue::Last(first)
                }
            };
            out.logged.push((name, value));
        }
        for (k, (name, _)) in counters.iter().enumerate() {
            out.counters
                .insert(name.clone(), rows[0][at + k].round() as u64);
        }
        out
    }
}

/// A logged value of one micro-step on the host, before it is combined with the step's other
/// micro-steps.
#[derive(Clone, Debug, PartialEq)]
pub enum HostValue {
    Mean(f64),
    Rate { hits: f64, of: f64 },
    Last(Vec<f64>),
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
    /// (`counts`, from [`Pending::mean_counts`]) and the count, each rate's hits and total, the
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
