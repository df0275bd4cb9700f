//! Data parallelism across processes, on LibTorch's distributed engine (c10d): one process per
//! device, launched by `torchrun`, `srun` or `mpirun` ([`World::from_env`]), joined through a
//! TCPStore rendezvous, gradients and step values summed by Gloo's all-reduce on host buffers
//! (the bridge `csrc/c10d.cpp`, feature `tch`).
//!
//! Without launcher variables a run is a world of one and nothing here runs.

pub mod world;

#[cfg(feature = "tch")]
mod c10d;

pub use world::World;

use std::time::Duration;

use crate::{Error, Result};

/// A joined process group (world size > 1).
pub struct Group {
    pub world: World,
    #[cfg(feature = "tch")]
    inner: c10d::Handle,
}

/// Floats per all-reduce bucket (16 MiB of f32): buckets are all started, then waited on.
pub const BUCKET: usize = 4 << 20;

impl Group {
    /// Joins `world` (None for a world of one). Every rank waits at most `timeout` for the
    /// others, at the rendezvous and in each collective.
    pub fn join(world: &World, timeout: Duration) -> Result<Option<Self>> {
        if world.size <= 1 {
            return Ok(None);
        }
        #[cfg(feature = "tch")]
        {
            let inner = c10d::Handle::new(world, timeout).map_err(|e| {
                world.error(&format!(
                    "joining the group at {}:{} failed: {e}",
                    world.master_addr, world.master_port
                ))
            })?;
            Ok(Some(Self {
                world: world.clone(),
                inner,
            }))
        }
        #[cfg(not(feature = "tch"))]
        {
            let _ = timeout;
            Err(Error::Config(format!(
                "the launcher asks for {} processes (WORLD_SIZE), but this trueneg was built without the `tch` feature, which carries LibTorch's distributed engine: build with `--features tch` (scripts/build-gpu.sh)",
                world.size
            )))
        }
    }

    /// Sums `data` over the ranks, in place.
    pub fn sum_f32(&self, data: &mut [f32]) -> Result<()> {
        #[cfg(feature = "tch")]
        return self
            .inner
            .sum_f32(data, BUCKET)
            .map_err(|e| self.failed("an all-reduce", &e));
        #[cfg(not(feature = "tch"))]
        unreachable!("no group without the tch feature: {}", data.len())
    }

    /// Sums `data` over the ranks, in place (counts, step values: exact to 2^53).
    pub fn sum_f64(&self, data: &mut [f64]) -> Result<()> {
        #[cfg(feature = "tch")]
        return self
            .inner
            .sum_f64(data)
            .map_err(|e| self.failed("an all-reduce", &e));
        #[cfg(not(feature = "tch"))]
        unreachable!("no group without the tch feature: {}", data.len())
    }

    /// Copies rank 0's `data` to every rank.
    pub fn broadcast_f32(&self, data: &mut [f32]) -> Result<()> {
        #[cfg(feature = "tch")]
        return self
            .inner
            .broadcast_f32(data)
            .map_err(|e| self.failed("a broadcast", &e));
        #[cfg(not(feature = "tch"))]
        unreachable!("no group without the tch feature: {}", data.len())
    }

    /// Waits until every rank has arrived.
    pub fn barrier(&self) -> Result<()> {
        #[cfg(feature = "tch")]
        return self
            .inner
            .barrier()
            .map_err(|e| self.failed("a barrier", &e));
        #[cfg(not(feature = "tch"))]
        unreachable!("no group without the tch feature")
    }

    /// The error of a failed collective `what`, naming the ranks that stopped: the survivors
    /// mark themselves in the store and wait [`ROLL_CALL`] for each other.
    #[cfg(feature = "tch")]
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

/// How long the ranks that survive a failed collective wait for each other's roll call.
#[cfg(feature = "tch")]
const ROLL_CALL: Duration = Duration::from_secs(5);

impl World {
    /// An error of this rank, naming it.
    pub fn error(&self, what: &str) -> Error {
        Error::Distributed(format!("rank {} of {}: {what}", self.rank, self.size))
    }
}
