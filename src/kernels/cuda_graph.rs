//! CUDA graphs: a step's kernels recorded once (LibTorch's `at::cuda::CUDAGraph`, through
//! `csrc/cuda.cpp`) and replayed as one launch, so that a small model's step no longer waits
//! on the CPU launching its thousands of kernels one by one.
//!
//! What a recorded step needs from its caller (`bench --cuda-graph` does all of it):
//! - inputs in device tensors uploaded before recording, which outlive the graph (a new batch
//!   is copied into them with [`copy_into`]); nothing uploaded or read back inside the step
//!   (`kernels::host_reads` counts the reads);
//! - state that keeps its memory: the optimizer writes its new parameters and moments into
//!   the buffers it read them from, and its step-dependent factors (learning rate, bias
//!   corrections) are device values written before each replay (the optimizer's `stage`);
//! - random draws from LibTorch's CUDA generator (masks, the ELECTRA generator's tokens): the graph
//!   registers it, and each replay draws what the unrecorded step would have drawn.
//!
//! The steps before the recorded one (the warm-up: LibTorch's lazy set-up, cuBLAS workspaces)
//! run on the graph's side stream too; every step after it is a replay. The blocks the warm-up
//! left in LibTorch's caching allocator are given back to the GPU before recording (the
//! graph's private pool cannot reuse them), so the run's peak is the larger of the warm-up's
//! and the recorded step's, not their sum.

use burn::prelude::*;

use crate::{Error, Result};

/// Whether this build can record CUDA graphs (a `tch` build against a LibTorch with CUDA).
pub fn available() -> bool {
    cfg!(all(feature = "tch", trueneg_cuda))
}

/// Whether tensors on `device` can be rewritten in place ([`copy_into`]): LibTorch's devices.
pub fn in_place(device: &Device) -> bool {
    #[cfg(feature = "tch")]
    {
        super::select::is_libtorch(device)
    }
    #[cfg(not(feature = "tch"))]
    {
        let _ = device;
        false
    }
}

/// Copies `src` into `dst`'s memory (same shape and dtype), on LibTorch devices: how new inputs
/// reach a recorded step.
pub fn copy_into<const D: usize, K>(dst: &Tensor<D, K>, src: &Tensor<D, K>)
where
    K: burn::tensor::kind::Basic,
{
    #[cfg(feature = "tch")]
    {
        super::libtorch::copy_into(dst, src)
    }
    #[cfg(not(feature = "tch"))]
    {
        let _ = (dst, src);
        unreachable!("copy_into is for LibTorch tensors")
    }
}

#[cfg(all(feature = "tch", trueneg_cuda))]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    unsafe extern "C" {
        pub fn trueneg_graph_new(
            device: c_int,
            out: *mut *mut c_void,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
        pub fn trueneg_graph_begin(graph: *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
        pub fn trueneg_graph_end(graph: *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
        pub fn trueneg_graph_replay(graph: *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
        pub fn trueneg_graph_free(graph: *mut c_void);
        pub fn trueneg_cuda_memory_peaks(
            device: c_int,
            reset: c_int,
            allocated: *mut i64,
            reserved: *mut i64,
            err: *mut c_char,
            err_len: usize,
        ) -> c_int;
    }
}

/// LibTorch's CUDA caching allocator on `device` (`libtorch-cuda[:i]` in a build with the CUDA
/// bridge): the peak bytes allocated to tensors and reserved from the GPU since the last
/// reset (PyTorch's `max_memory_allocated` / `max_memory_reserved`, the recorded step's
/// private pool included); `reset` starts new peaks. `None` on other devices and builds.
pub fn memory_peaks(device: &Device, reset: bool) -> Option<(u64, u64)> {
    #[cfg(all(feature = "tch", trueneg_cuda))]
    {
        let index = super::libtorch::cuda_index(device)?;
        let (mut allocated, mut reserved) = (0i64, 0i64);
        checked("memory statistics", |err, len| unsafe {
            ffi::trueneg_cuda_memory_peaks(
                index as i32,
                reset as i32,
                &mut allocated,
                &mut reserved,
                err,
                len,
            )
        })
        .ok()?;
        Some((allocated as u64, reserved as u64))
    }
    #[cfg(not(all(feature = "tch", trueneg_cuda)))]
    {
        let _ = (device, reset);
        None
    }
}

/// A recorded step (see the module documentation). Dropping it waits for the device and
/// returns this thread to the stream it used before.
pub struct CudaGraph {
    #[cfg(all(feature = "tch", trueneg_cuda))]
    handle: *mut std::ffi::c_void,
}

#[cfg(all(feature = "tch", trueneg_cuda))]
fn checked(what: &str, f: impl FnOnce(*mut std::ffi::c_char, usize) -> i32) -> Result<()> {
    crate::error::bridge_call("failed", f)
        .map_err(|e| Error::Config(format!("CUDA graph: {what}: {e}")))
}

impl CudaGraph {
    /// A graph on `device`, which must be `libtorch-cuda[:i]`. From now on this thread's work
    /// on that GPU runs on the graph's side stream.
    pub fn new(device: &Device) -> Result<Self> {
        #[cfg(all(feature = "tch", trueneg_cuda))]
        {
            let index = super::libtorch::cuda_index(device).ok_or_else(|| {
                Error::Config(format!(
                    "CUDA graphs run on libtorch-cuda devices, not on {device:?}"
                ))
            })?;
            let mut handle = std::ptr::null_mut();
            checked("set-up", |err, len| unsafe {
                ffi::trueneg_graph_new(index as i32, &mut handle, err, len)
            })?;
            Ok(Self { handle })
        }
        #[cfg(not(all(feature = "tch", trueneg_cuda)))]
        {
            let _ = device;
            Err(Error::Config(
                "CUDA graphs need a `tch` build against a LibTorch with CUDA (scripts/build-gpu.sh with PyTorch's CUDA wheel); this trueneg has none".into(),
            ))
        }
    }

    /// Records the kernels `step` launches (they do not run), then replays them once: the
    /// step's results, in memory that later replays overwrite.
    pub fn record<T>(&self, step: impl FnOnce() -> T) -> Result<T> {
        #[cfg(all(feature = "tch", trueneg_cuda))]
        {
            // Casts made before recording would be missing from the replays.
            super::param_cast::stale();
            checked("begin recording", |err, len| unsafe {
                ffi::trueneg_graph_begin(self.handle, err, len)
            })?;
            let out = step();
            checked("end recording", |err, len| unsafe {
                ffi::trueneg_graph_end(self.handle, err, len)
            })?;
            self.replay()?;
            Ok(out)
        }
        #[cfg(not(all(feature = "tch", trueneg_cuda)))]
        {
            let _ = step;
            unreachable!("no CudaGraph exists in this build")
        }
    }

    /// Runs the recorded step again (queued: nothing waits).
    pub fn replay(&self) -> Result<()> {
        #[cfg(all(feature = "tch", trueneg_cuda))]
        {
            checked("replay", |err, len| unsafe {
                ffi::trueneg_graph_replay(self.handle, err, len)
            })?;
            // The replay rewrote the parameters: casts made on the host are out of date.
            super::param_cast::stale();
            Ok(())
        }
        #[cfg(not(all(feature = "tch", trueneg_cuda)))]
        unreachable!("no CudaGraph exists in this build")
    }
}

#[cfg(all(feature = "tch", trueneg_cuda))]
impl Drop for CudaGraph {
    fn drop(&mut self) {
        unsafe { ffi::trueneg_graph_free(self.handle) }
    }
}
