//! Who this process is among a data-parallel job's processes, read from its launcher's
//! variables:
//! - `torchrun` (and any launcher of its conventions): `RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//!   `MASTER_ADDR`, `MASTER_PORT`; with `TORCHELASTIC_USE_AGENT_STORE=True` torchrun's agent
//!   already hosts the rendezvous store, and every rank connects to it as a client;
//! - Slurm's `srun`: `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`;
//! - `mpirun`: Open MPI's `OMPI_COMM_WORLD_RANK` / `_SIZE` / `_LOCAL_RANK`, or MPICH's
//!   `PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`.
//!
//! With `srun` and `mpirun`, `MASTER_ADDR` names rank 0's host and `MASTER_PORT` its store's
//! port. Unset, under `srun` they are the first host of the job's node list (where task 0
//! runs) and 10000 + the job id mod 20000 (two jobs sharing a node do not collide); otherwise
//! `127.0.0.1` (one node) and 29500.

use crate::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct World {
    pub rank: usize,
    pub size: usize,
    /// The process's index on its node: it picks the device (`libtorch-cuda:LOCAL_RANK`).
    pub local_rank: usize,
    pub master_addr: String,
    pub master_port: u16,
    /// torchrun's agent hosts the store: rank 0 connects instead of serving it.
    pub agent_store: bool,
    /// Which launcher's variables were read (for messages).
    pub launcher: &'static str,
}

/// Rank, size and local rank variables of each launcher, in the order they are tried.
const LAUNCHERS: [(&str, [&str; 3]); 4] = [
    ("torchrun", ["RANK", "WORLD_SIZE", "LOCAL_RANK"]),
    (
        "mpirun",
        [
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
        ],
    ),
    ("mpirun", ["PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"]),
    ("srun", ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"]),
];

/// Under `srun`: the first host of the job's node list and a port from the job id.
fn slurm(launcher: &str, var: &impl Fn(&str) -> Option<String>) -> (Option<String>, Option<u16>) {
    if launcher != "srun" {
        return (None, None);
    }
    let nodes = var("SLURM_STEP_NODELIST").or_else(|| var("SLURM_JOB_NODELIST"));
    let port = var("SLURM_JOB_ID")
        .and_then(|id| id.trim().parse::<u64>().ok())
        .map(|id| 10000 + (id % 20000) as u16);
    (nodes.as_deref().and_then(first_host), port)
}

/// The first host of a Slurm host list (`gpu[01-04,07],cpu3` → `gpu01`; every bracket takes its
/// first number, `r[1-2]-n[3-4]` → `r1-n3`).
pub fn first_host(list: &str) -> Option<String> {
    let (mut host, mut depth, mut skipping) = (String::new(), 0, false);
    for c in list.trim().chars() {
        match c {
            ',' if depth == 0 => break,
            '[' => (depth, skipping) = (depth + 1, false),
            ']' => depth -= 1,
            ',' | '-' if depth > 0 => skipping = true,
            _ if depth > 0 && skipping => {}
            _ => host.push(c),
        }
    }
    (!host.is_empty()).then_some(host)
}

impl World {
    /// A world of one process.
    pub fn single() -> Self {
        Self {
            rank: 0,
            size: 1,
            local_rank: 0,
            master_addr: "127.0.0.1".into(),
            master_port: 29500,
            agent_store: false,
            launcher: "none",
        }
    }

    /// The world the process's environment describes.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// The world the variables `var` gives describe (a world of one without any).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let Some((launcher, [rank, size, local])) = LAUNCHERS
            .into_iter()
            .find(|(_, [r, s, _])| var(r).is_some() && var(s).is_some())
        else {
            return Ok(Self::single());
        };
        let number = |name: &str, default: Option<usize>| -> Result<usize> {
            match var(name) {
                Some(v) => v.trim().parse().map_err(|_| {
                    Error::Config(format!(
                        "{launcher}'s variable {name} = {v:?} is not a number"
                    ))
                }),
                None => default.ok_or_else(|| Error::Config(format!("{name} is not set"))),
            }
        };
        let (slurm_addr, slurm_port) = slurm(launcher, &var);
        let world = Self {
            rank: number(rank, None)?,
            size: number(size, None)?,
            local_rank: number(local, Some(0))?,
            master_addr: var("MASTER_ADDR")
                .or(slurm_addr)
                .unwrap_or_else(|| "127.0.0.1".into()),
            master_port: match var("MASTER_PORT") {
                Some(p) => p.trim().parse().map_err(|_| {
                    Error::Config(format!("MASTER_PORT = {p:?} is not a port number"))
                })?,
                None => slurm_port.unwrap_or(29500),
            },
            agent_store: var("TORCHELASTIC_USE_AGENT_STORE").as_deref() == Some("True"),
            launcher,
        };
        if world.size == 0 || world.rank >= world.size {
            return Err(Error::Config(format!(
                "{launcher}'s variables give rank {} of a world of {}: the rank must be below the size",
                world.rank, world.size
            )));
        }
        Ok(world)
    }

    pub fn is_main(&self) -> bool {
        self.rank == 0
    }

    /// The CPU threads of this process in a job of several, when the launcher does not set
    /// `RAYON_NUM_THREADS`: its share of the node's `cores` among the node's processes
    /// (`LOCAL_WORLD_SIZE`, Open MPI's or MPICH's local size; Slurm's `SLURM_CPUS_PER_TASK` is
    /// the share itself; else every process is taken to share one node). `None` for a world
    /// of one.
    pub fn threads(&self, cores: usize, var: impl Fn(&str) -> Option<String>) -> Option<usize> {
        if self.size <= 1 || var("RAYON_NUM_THREADS").is_some() {
            return None;
        }
        let number = |k: &str| var(k).and_then(|v| v.trim().parse::<usize>().ok());
        if let Some(n) = number("SLURM_CPUS_PER_TASK") {
            return Some(n.max(1));
        }
        let local = [
            "LOCAL_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
            "MPI_LOCALNRANKS",
        ]
        .into_iter()
        .find_map(number)
        .unwrap_or(self.size);
        Some((cores / local.max(1)).max(1))
    }
}
