//! The C functions of `csrc/c10d.cpp` and a safe handle over them.

use std::ffi::{CString, c_char, c_int, c_void};
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::os::fd::IntoRawFd;
use std::time::Duration;

use super::World;

unsafe extern "C" {
    fn trueneg_c10d_new(
        host: *const c_char,
        port: c_int,
        rank: c_int,
        world: c_int,
        agent_store: c_int,
        listen_fd: c_int,
        timeout_ms: c_int,
        out: *mut *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn trueneg_c10d_free(group: *mut c_void);
    fn trueneg_c10d_allreduce_sum(
        group: *mut c_void,
        data: *mut c_void,
        n: i64,
        double: c_int,
        bucket: i64,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn trueneg_c10d_allreduce_start(
        group: *mut c_void,
        tensor: *mut c_void,
        gloo: c_int,
        work: *mut *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn trueneg_c10d_work_wait(work: *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
    fn trueneg_c10d_work_free(work: *mut c_void);
    fn trueneg_c10d_broadcast(
        group: *mut c_void,
        data: *mut f32,
        n: i64,
        root: c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn trueneg_c10d_store_set(
        group: *mut c_void,
        key: *const c_char,
        data: *const u8,
        len: usize,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn trueneg_c10d_store_get(
        group: *mut c_void,
        key: *const c_char,
        data: *mut u8,
        cap: usize,
        len: *mut usize,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn trueneg_c10d_barrier(group: *mut c_void, err: *mut c_char, err_len: usize) -> c_int;
    fn trueneg_c10d_absent(
        group: *mut c_void,
        rank: c_int,
        world: c_int,
        wait_ms: c_int,
        absent: *mut c_int,
        n_absent: *mut c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
}

/// Runs `f` with an error buffer; the first line of its text when `f` returns non-zero.
fn checked(f: impl FnOnce(*mut c_char, usize) -> c_int) -> Result<(), String> {
    crate::error::bridge_call("c10d failed", f)
}

/// A c10d process group (TCPStore + ProcessGroupGloo).
pub struct Handle(*mut c_void);

// The group is used from the training thread only; c10d's own threads are its business.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Handle {
    pub fn new(w: &World, timeout: Duration) -> Result<Self, String> {
        let host = CString::new(w.master_addr.clone()).map_err(|e| e.to_string())?;
        let mut out = std::ptr::null_mut();
        let ms = timeout.as_millis().min(i32::MAX as u128) as c_int;
        // The store's host serves on MASTER_ADDR's address only (the store owns the socket),
        // unless TRUENEG_STORE_BIND=all (MASTER_ADDR a virtual address, e.g. a Kubernetes
        // service, that rank 0's host cannot bind).
        let all = std::env::var("TRUENEG_STORE_BIND").as_deref() == Ok("all");
        let listen_fd = if w.rank == 0 && !w.agent_store && !all {
            store_socket(w)?.into_raw_fd()
        } else {
            -1
        };
        checked(|err, len| unsafe {
            trueneg_c10d_new(
                host.as_ptr(),
                w.master_port as c_int,
                w.rank as c_int,
                w.size as c_int,
                w.agent_store as c_int,
                listen_fd,
                ms,
                &mut out,
                err,
                len,
            )
        })?;
        Ok(Self(out))
    }

    pub fn sum_f32(&self, data: &mut [f32], bucket: usize) -> Result<(), String> {
        checked(|err, len| unsafe {
            trueneg_c10d_allreduce_sum(
                self.0,
                data.as_mut_ptr().cast(),
                data.len() as i64,
                0,
                bucket.max(1) as i64,
                err,
                len,
            )
        })
    }

    pub fn sum_f64(&self, data: &mut [f64]) -> Result<(), String> {
        checked(|err, len| unsafe {
            trueneg_c10d_allreduce_sum(
                self.0,
                data.as_mut_ptr().cast(),
                data.len() as i64,
                1,
                data.len().max(1) as i64,
                err,
                len,
            )
        })
    }

    /// Sums the LibTorch tensor `flat` (contiguous, 1-D) over the ranks, in place, in buckets
    /// of `bucket` elements, on its device: every bucket's all-reduce is started
    /// ([`Handle::start_sum`]), then waited on. With NCCL nothing waits on the host: the current
    /// CUDA stream is ordered after it.
    pub fn sum_tensor(&self, flat: &tch::Tensor, bucket: usize, gloo: bool) -> Result<(), String> {
        let n = flat.size1().map_err(|e| e.to_string())?;
        let bucket = bucket.max(1) as i64;
        let started = (0..n)
            .step_by(bucket as usize)
            .map(|at| {
                let view = flat.narrow(0, at, bucket.min(n - at));
                Ok((self.start_sum(&view, gloo)?, view))
            })
            .collect::<Result<Vec<_>, String>>()?;
        started.iter().try_for_each(|(w, _)| w.wait())
    }

    /// Starts summing `t` (contiguous) over the ranks, in place, on its device; the host goes
    /// on. `t` must stay alive and untouched until the work is waited on.
    pub fn start_sum(&self, t: &tch::Tensor, gloo: bool) -> Result<Work, String> {
        let mut work = std::ptr::null_mut();
        checked(|err, len| unsafe {
            trueneg_c10d_allreduce_start(
                self.0,
                t.as_ptr() as *mut c_void,
                gloo as c_int,
                &mut work,
                err,
                len,
            )
        })?;
        Ok(Work(work))
    }

    pub fn broadcast_f32(&self, data: &mut [f32]) -> Result<(), String> {
        checked(|err, len| unsafe {
            trueneg_c10d_broadcast(self.0, data.as_mut_ptr(), data.len() as i64, 0, err, len)
        })
    }

    /// The ranks that do not answer within `wait` (after a failed collective).
    pub fn absent(&self, w: &World, wait: Duration) -> Result<Vec<usize>, String> {
        let mut absent = vec![0 as c_int; w.size];
        let mut n: c_int = 0;
        let ms = wait.as_millis().min(i32::MAX as u128) as c_int;
        checked(|err, len| unsafe {
            trueneg_c10d_absent(
                self.0,
                w.rank as c_int,
                w.size as c_int,
                ms,
                absent.as_mut_ptr(),
                &mut n,
                err,
                len,
            )
        })?;
        Ok(absent[..n as usize].iter().map(|&r| r as usize).collect())
    }

    /// Sets `key` to `value` in the rendezvous store.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<(), String> {
        let key = CString::new(key).map_err(|e| e.to_string())?;
        checked(|err, len| unsafe {
            trueneg_c10d_store_set(self.0, key.as_ptr(), value.as_ptr(), value.len(), err, len)
        })
    }

    /// The value of `key` in the store, waiting for it up to the group's timeout.
    pub fn get(&self, key: &str) -> Result<Vec<u8>, String> {
        let key = CString::new(key).map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 4096];
        loop {
            let mut n = 0usize;
            checked(|err, len| unsafe {
                trueneg_c10d_store_get(
                    self.0,
                    key.as_ptr(),
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut n,
                    err,
                    len,
                )
            })?;
            if n <= buf.len() {
                buf.truncate(n);
                return Ok(buf);
            }
            buf = vec![0u8; n];
        }
    }

    pub fn barrier(&self) -> Result<(), String> {
        checked(|err, len| unsafe { trueneg_c10d_barrier(self.0, err, len) })
    }
}

/// A started all-reduce (`Handle::start_sum`).
pub struct Work(*mut c_void);

// c10d's work objects are waited on from any thread.
unsafe impl Send for Work {}

impl Work {
    pub fn wait(&self) -> Result<(), String> {
        checked(|err, len| unsafe { trueneg_c10d_work_wait(self.0, err, len) })
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        unsafe { trueneg_c10d_work_free(self.0) }
    }
}

/// A listening socket bound to MASTER_ADDR:MASTER_PORT (the first of MASTER_ADDR's addresses
/// this host has), so that the store does not listen on every interface as c10d's own does.
fn store_socket(w: &World) -> Result<TcpListener, String> {
    let addrs: Vec<SocketAddr> = (w.master_addr.as_str(), w.master_port)
        .to_socket_addrs()
        .map_err(|e| format!("MASTER_ADDR={:?} does not resolve: {e}", w.master_addr))?
        .collect();
    let mut last = None;
    for a in &addrs {
        match TcpListener::bind(a) {
            Ok(l) => {
                let literal =
                    w.master_addr.parse::<IpAddr>().is_ok() || w.master_addr == "localhost";
                if a.ip().is_loopback() && !literal {
                    tracing::warn!(
                        "MASTER_ADDR={} resolves to {} on rank 0's host: the store listens there only, so ranks on other nodes cannot reach it; name rank 0's cluster address",
                        w.master_addr,
                        a.ip()
                    );
                }
                return Ok(l);
            }
            Err(e) => last = Some(format!("{a}: {e}")),
        }
    }
    Err(format!(
        "rank 0 hosts the store, but cannot listen on MASTER_ADDR={}:{} ({}): MASTER_ADDR must name an address of rank 0's host and the port must be free (TRUENEG_STORE_BIND=all listens on every interface, as c10d's own store does)",
        w.master_addr,
        w.master_port,
        last.unwrap_or_else(|| "no address".into())
    ))
}

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { trueneg_c10d_free(self.0) }
    }
}
