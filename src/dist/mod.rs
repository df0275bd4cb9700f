//! Data parallelism across processes, on LibTorch's distributed engine (c10d): one process per
//! device, launched by `torchrun`, `srun` or `mpirun` ([`World::from_env`]), joined through a
//! TCPStore rendezvous, gradients and step values summed by Gloo's all-reduce on host buffers
//! (the bridge `csrc/c10d.cpp`, feature `tch`).
//!
//! Without launcher variables a run is a world of one and nothing here runs.

pub mod world;

#[cfg(feature = "tch")]
mod c10d;
#[cfg(not(feature = "tch"))]
mod c10d {
    //! Without the `tch` feature no group can be joined: a handle that cannot exist.
    use std::time::Duration;

    pub enum Handle {}

    impl Handle {
        pub fn new(w: &super::World, _timeout: Duration) -> Result<Self, String> {
            Err(format!(
                "the launcher asks for {} processes, but this trueneg was built without the `tch` feature, which carries LibTorch's distributed engine: build with `--features tch` (docs/gpu.md, Cargo features and GPUs)",
                w.size
            ))
        }
        pub fn sum_f32(&self, _: &mut [f32], _: usize) -> Result<(), String> {
            match *self {}
        }
        pub fn sum_f64(&self, _: &mut [f64]) -> Result<(), String> {
            match *self {}
        }
        pub fn broadcast_f32(&self, _: &mut [f32]) -> Result<(), String> {
            match *self {}
        }
        pub fn barrier(&self) -> Result<(), String> {
            match *self {}
        }
        pub fn set(&self, _: &str, _: &[u8]) -> Result<(), String> {
            match *self {}
        }
        pub fn get(&self, _: &str) -> Result<Vec<u8>, String> {
            match *self {}
        }
        pub fn absent(&self, _: &super::World, _: Duration) -> Result<Vec<usize>, String> {
            match *self {}
        }
    }
}

pub use world::World;

/// A started all-reduce ([`Group::start_sum`]).
#[cfg(feature = "tch")]
pub use c10d::Work;

use std::time::Duration;

use crate::{Error, Result};

/// A joined process group (world size > 1).
pub struct Group {
    pub world: World,
    inner: c10d::Handle,
    /// CUDA tensors are summed by Gloo instead of NCCL (`TRUENEG_CUDA_COLLECTIVES=gloo`:
    /// several processes on one GPU, which NCCL refuses).
    #[cfg_attr(not(feature = "tch"), allow(dead_code))]
    cuda_gloo: bool,
}

/// Floats per all-reduce bucket (16 MiB of f32): buckets are all started, then waited on.
pub const BUCKET: usize = 4 << 20;

/// How long the ranks that survive a failed collective wait for each other's roll call.
const ROLL_CALL: Duration = Duration::from_secs(5);

impl Group {
    /// Joins `world` (None for a world of one, except under torchrun in a build with the
    /// engine: there a world of one joins too, as PyTorch's does, so that NCCL's cost can be
    /// measured; torchrun's agent hosts its store, so no port is taken). Every rank waits at
    /// most `timeout` for the others, at the rendezvous and in each collective.
    pub fn join(world: &World, timeout: Duration) -> Result<Option<Self>> {
        let lone_torchrun = world.launcher == "torchrun" && cfg!(feature = "tch");
        if world.size <= 1 && !lone_torchrun {
            return Ok(None);
        }
        let inner = c10d::Handle::new(world, timeout).map_err(|e| {
            world.error(&format!(
                "joining the group at {}:{} failed: {e}",
                world.master_addr, world.master_port
            ))
        })?;
        let cuda_gloo = match std::env::var("TRUENEG_CUDA_COLLECTIVES").as_deref() {
            Err(_) | Ok("nccl") => false,
            Ok("gloo") => true,
            Ok(other) => {
                return Err(world.error(&format!(
                    "TRUENEG_CUDA_COLLECTIVES={other:?}: use nccl (the default) or gloo"
                )));
            }
        };
        Ok(Some(Self {
            world: world.clone(),
            inner,
            cuda_gloo,
        }))
    }

    /// Sums the LibTorch tensor `flat` (1-D) over the ranks, in place, on its device, in
    /// buckets of [`BUCKET`]: Gloo for host tensors, NCCL for CUDA tensors (the current CUDA
    /// stream waits for it, the host does not).
    #[cfg(feature = "tch")]
    pub fn sum_tensor(&self, flat: &tch::Tensor) -> Result<()> {
        let r = self.inner.sum_tensor(flat, BUCKET, self.cuda_gloo);
        r.map_err(|e| self.failed("an all-reduce", &e))
    }

    /// Starts summing the LibTorch tensor `t` (contiguous) over the ranks, in place, on its
    /// device, and returns at once; [`Group::wait`] waits for it. Every rank must start the
    /// same all-reduces in the same order.
    #[cfg(feature = "tch")]
    pub fn start_sum(&self, t: &tch::Tensor) -> Result<Work> {
        let r = self.inner.start_sum(t, self.cuda_gloo);
        r.map_err(|e| self.failed("an all-reduce", &e))
    }

    /// Waits for a started all-reduce (NCCL: the current CUDA stream waits, the host goes on).
    #[cfg(feature = "tch")]
    pub fn wait(&self, w: &Work) -> Result<()> {
        w.wait().map_err(|e| self.failed("an all-reduce", &e))
    }

    /// Sums `data` over the ranks, in place.
    pub fn sum_f32(&self, data: &mut [f32]) -> Result<()> {
        let r = self.inner.sum_f32(data, BUCKET);
        r.map_err(|e| self.failed("an all-reduce", &e))
    }

    /// Sums `data` over the ranks, in place (counts, step values: exact to 2^53).
    pub fn sum_f64(&self, data: &mut [f64]) -> Result<()> {
        let r = self.inner.sum_f64(data);
        r.map_err(|e| self.failed("an all-reduce", &e))
    }

    /// Copies rank 0's `data` to every rank.
    pub fn broadcast_f32(&self, data: &mut [f32]) -> Result<()> {
        let r = self.inner.broadcast_f32(data);
        r.map_err(|e| self.failed("a broadcast", &e))
    }

    /// Waits until every rank has arrived.
    pub fn barrier(&self) -> Result<()> {
        let r = self.inner.barrier();
        r.map_err(|e| self.failed("a barrier", &e))
    }

    /// Checks that every rank runs the same `what` (its canonical text: configuration, data,
    /// build): each rank puts its text in the store and compares everyone's with its own, so
    /// that every rank of a mismatched job stops, naming the first line that differs. c10d
    /// has no authentication; this also turns away a stray process of another job.
    pub fn agree(&self, what: &str, text: &str) -> Result<()> {
        let key = |r: usize| format!("agree/{what}/{r}");
        let failed = |e: String| self.failed("exchanging the configuration", &e);
        self.inner
            .set(&key(self.world.rank), text.as_bytes())
            .map_err(failed)?;
        let me = self.world.rank;
        for r in 0..self.world.size {
            let theirs = self.inner.get(&key(r)).map_err(failed)?;
            let theirs = String::from_utf8_lossy(&theirs);
            // Told from the lower rank's side, the same on both.
            let (low, high, first, second) = if r < me {
                (r, me, theirs.as_ref(), text)
            } else {
                (me, r, text, theirs.as_ref())
            };
            if let Some((a, b)) = first_difference(first, second) {
                return Err(self.world.error(&format!(
                    "rank {high}'s {what} differs from rank {low}'s: {b} where rank {low} has {a} (every rank must run the same configuration, data and build)"
                )));
            }
        }
        Ok(())
    }

    /// The error of a failed collective `what`, naming the ranks that stopped: the survivors
    /// mark themselves in the store and wait [`ROLL_CALL`] for each other.
    fn failed(&self, what: &str, cause: &str) -> Error {
        let lost = match self.inner.absent(&self.world, ROLL_CALL) {
            Ok(ranks) if ranks.is_empty() => "no rank is missing".to_string(),
            Ok(ranks) => {
                let r: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
                format!("rank {} stopped or is unreachable", r.join(", "))
            }
            Err(_) => "the rendezvous store is gone: rank 0 (or torchrun's agent) stopped".into(),
        };
        self.world
            .error(&format!("{what} failed: {lost} ({cause})"))
    }
}

/// The first line where `a` and `b` differ, in each (with its TOML `[section]`, if any);
/// `None` when they are equal.
fn first_difference(a: &str, b: &str) -> Option<(String, String)> {
    if a == b {
        return None;
    }
    let (mut la, mut lb) = (a.lines(), b.lines());
    let mut section = String::new();
    loop {
        let (x, y) = (la.next(), lb.next());
        if x != y {
            let show = |l: Option<&str>| match l {
                None => "nothing more".to_string(),
                Some(l) if section.is_empty() || l.starts_with('[') => format!("`{l}`"),
                Some(l) => format!("`{section} {l}`"),
            };
            return Some((show(x), show(y)));
        }
        match x {
            Some(l) if l.starts_with('[') => section = l.to_string(),
            Some(_) => {}
            None => return None,
        }
    }
}

impl World {
    /// An error of this rank, naming it.
    pub fn error(&self, what: &str) -> Error {
        Error::Distributed(format!("rank {} of {}: {what}", self.rank, self.size))
    }
}
