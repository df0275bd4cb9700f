//! How many LibTorch operations a stretch of work dispatches (`bench --count-ops`), by name.
//!
//! On a GPU each operation that does arithmetic is at least one kernel launch, and a small
//! model's step is bound by launching them (the CPU queues them one by one), so their count is
//! what a recorded step (`kernels::cuda_graph`) saves and what mixed precision adds. The
//! count comes from LibTorch itself (a RecordFunction callback, `csrc/ops.cpp`, which says
//! which calls launch a kernel): an ATen call is one kernel unless it launches none itself
//! (views, allocations) or makes kernel-launching calls inside it, which are counted instead;
//! a dtype cast (`aten::_to_copy`) counts once. So it is a lower bound of the launches (an
//! operation that launches its own kernel beside the calls inside it is missed). It is the
//! same on LibTorch's CPU device as on a GPU except where LibTorch takes another route for the
//! device (the heads' products: CUDA's fused kernels, the CPU's composed one), so most of it can be
//! measured without a GPU.

use crate::{Error, Result};

/// The dtype cast: one kernel (after an allocation).
pub const CAST: &str = "aten::_to_copy";

/// Operations counted by name, most frequent first, with whether they launch a kernel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpCounts {
    pub by_name: Vec<(String, u64)>,
    /// Calls into LibTorch from outside any other counted call, whatever they launch: trueneg's
    /// (through burn) and the autograd engine's evaluation of each backward node in the backward
    /// passes handed to LibTorch. Each costs host time (dispatch, burn's bookkeeping).
    pub calls: u64,
    kernels: std::collections::HashSet<String>,
}

impl OpCounts {
    /// Parses the bridge's "= calls N" line and "K name count" lines (K: `k` for a kernel,
    /// `-` for none).
    #[cfg_attr(not(feature = "tch"), allow(dead_code))]
    fn parse(text: &str) -> Self {
        let mut kernels = std::collections::HashSet::new();
        let calls = text
            .lines()
            .find_map(|l| l.strip_prefix("= calls ")?.parse().ok())
            .unwrap_or(0);
        let mut by_name: Vec<(String, u64)> = text
            .lines()
            .filter(|l| !l.starts_with('='))
            .filter_map(|l| {
                let (kind, rest) = l.split_once(' ')?;
                let (name, n) = rest.rsplit_once(' ')?;
                if kind == "k" {
                    kernels.insert(name.to_string());
                }
                Some((name.to_string(), n.parse().ok()?))
            })
            .collect();
        by_name.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Self {
            by_name,
            calls,
            kernels,
        }
    }

    /// Whether the operation `name` launches a kernel.
    pub fn launches(&self, name: &str) -> bool {
        self.kernels.contains(name)
    }

    /// Operations that launch a kernel.
    pub fn launching(&self) -> u64 {
        self.sum(|n| self.launches(n))
    }

    /// Operations that launch none (views, allocations).
    pub fn without_kernel(&self) -> u64 {
        self.sum(|n| !self.launches(n))
    }

    /// Operations called `name`.
    pub fn of(&self, name: &str) -> u64 {
        self.sum(|n| n == name)
    }

    fn sum(&self, keep: impl Fn(&str) -> bool) -> u64 {
        self.by_name
            .iter()
            .filter(|(n, _)| keep(n))
            .map(|(_, c)| c)
            .sum()
    }
}

#[cfg(feature = "tch")]
mod ffi {
    use std::ffi::{c_char, c_int};

    unsafe extern "C" {
        pub fn trueneg_ops_count_begin(err: *mut c_char, err_len: usize) -> c_int;
        pub fn trueneg_ops_count_end(out: *mut c_char, out_len: usize) -> usize;
    }
}

/// Whether this build can count operations (a `tch` build).
pub fn available() -> bool {
    cfg!(feature = "tch")
}

/// Runs `work` and counts the LibTorch operations it dispatches: this thread's, and those of
/// LibTorch's autograd engine working for it; not other threads' (`tch` builds; work on other
/// backends dispatches none). Counts on several threads take turns.
pub fn count<T>(work: impl FnOnce() -> T) -> Result<(T, OpCounts)> {
    #[cfg(feature = "tch")]
    {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        crate::error::bridge_call("failed", |err, len| unsafe {
            ffi::trueneg_ops_count_begin(err, len)
        })
        .map_err(|e| Error::Config(format!("counting LibTorch operations: {e}")))?;
        let out = work();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = unsafe { ffi::trueneg_ops_count_end(buf.as_mut_ptr().cast(), buf.len()) };
            if n < buf.len() {
                let text = String::from_utf8_lossy(&buf[..n]);
                return Ok((out, OpCounts::parse(&text)));
            }
            buf.resize(n + 1, 0);
        }
    }
    #[cfg(not(feature = "tch"))]
    {
        let _ = work;
        Err(Error::Config(
            "counting operations needs a `tch` build (LibTorch counts them); this trueneg has none"
                .into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_parsed_sorted_and_split_by_kind() {
        let c =
            OpCounts::parse("= calls 9\n- aten::view 7\nk aten::mm 3\nk aten::_to_copy 5\nbad\n");
        assert_eq!(
            c.by_name,
            vec![
                ("aten::view".to_string(), 7),
                ("aten::_to_copy".to_string(), 5),
                ("aten::mm".to_string(), 3)
            ]
        );
        assert_eq!((c.launching(), c.without_kernel(), c.of(CAST)), (8, 7, 5));
        assert_eq!(c.calls, 9);
    }
}
