"""PyTorch, imported only when a measurement runs (``import distlab`` never imports torch)."""

from __future__ import annotations

from ..errors import MissingDependencyError

#: What a student sees when a measurement needs PyTorch and it is not installed.
TORCH_MESSAGE = (
    "this needs PyTorch, which distlab does not install: pip install torch==2.13.0 (the version lesson 9 "
    "is tested with; for the CPU-only build add --index-url https://download.pytorch.org/whl/cpu), then "
    "restart the kernel"
)


def require_torch():
    """Import and return torch, or raise MissingDependencyError with the install command."""
    try:
        import torch
    except ImportError as exc:  # torch missing, or a broken install that cannot load
        raise MissingDependencyError(TORCH_MESSAGE) from exc
    return torch


def torch_available() -> bool:
    """True when torch can be imported (tests and the notebook use this to skip cleanly)."""
    try:
        require_torch()
    except MissingDependencyError:
        return False
    return True


def join_gloo_group(rank: int, world: int, store_path: str, timeout_s: float, *, store_timeout: bool = True):
    """Join the gloo process group of `world` CPU ranks that meet through the FileStore at `store_path` (one torch
    thread per rank, `timeout_s` for the group and, with store_timeout, for the store too). Returns
    torch.distributed. The workers of lesson 9's and lessons 10-11's measurements call it first."""
    from datetime import timedelta

    torch = require_torch()
    import torch.distributed as dist

    torch.set_num_threads(1)
    timeout = timedelta(seconds=timeout_s)
    store = dist.FileStore(store_path, world)
    if store_timeout:
        store.set_timeout(timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    return dist


def unique_storage_bytes(tensors, seen: set | None = None) -> int:
    """Bytes of the distinct storages behind `tensors` (views of one buffer count once).

    `seen` (data pointers) is updated, so several calls over one set of tensors never count a
    storage twice.
    """
    seen = set() if seen is None else seen
    total = 0
    for t in tensors:
        if t is None:
            continue
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in seen:
            continue
        seen.add(key)
        total += storage.nbytes()
    return total
