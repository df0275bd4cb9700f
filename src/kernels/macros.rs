//! Calls into burn's backend extensions (each operation's own trait on `flex` and on LibTorch)
//! through its dispatch backend, compiled out in a build without the backend's feature.

/// Calls operation `op` of the backend extension `ext` through burn's dispatch backend in a
/// build with cargo feature `feature`; without it the arguments are dropped and the call is
/// unreachable (callers check [`fused`](super::fused) or [`torch`](super::torch) first).
macro_rules! extension_op {
    ($feature:literal, $ext:path, $op:ident($($arg:expr),* $(,)?)) => {{
        #[cfg(feature = $feature)]
        {
            <burn::backend::Dispatch as $ext>::$op($($arg),*)
        }
        #[cfg(not(feature = $feature))]
        {
            $(let _ = $arg;)*
            unreachable!(concat!("this operation needs cargo feature ", $feature))
        }
    }};
}
