"""numpy arrays and torch tensors to and from the core's numpy arrays. A torch CPU tensor
reaches numpy without a copy through DLPack; a tensor on another device is copied to the host
first (the core runs on the CPU) and its results go back to that device."""

import numpy as np

try:
    import torch
except ImportError:  # torch is optional
    torch = None


def is_torch(x):
    return torch is not None and isinstance(x, torch.Tensor)


def to_numpy(x, dtype):
    """``x`` as a contiguous numpy array of ``dtype`` (detached from autograd). A torch tensor
    of another dtype (bf16 under autocast, which numpy lacks) is cast by torch first."""
    if is_torch(x):
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        wanted = {np.dtype(np.float32): torch.float32, np.dtype(np.int64): torch.int64}.get(
            np.dtype(dtype)
        )
        if wanted is not None and t.dtype != wanted:
            t = t.to(wanted)
        t = t.contiguous()
        a = np.from_dlpack(t)
        return np.ascontiguousarray(a, dtype=dtype)
    return np.ascontiguousarray(np.asarray(x), dtype=dtype)


def like(a, reference):
    """The numpy array ``a`` as ``reference``'s kind: a torch tensor on its device, or numpy."""
    if is_torch(reference):
        return torch.from_dlpack(np.ascontiguousarray(a)).to(reference.device)
    return a
