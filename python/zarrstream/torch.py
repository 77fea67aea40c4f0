"""PyTorch adapters: ``zarrstream.torch.IterableDataset`` for code that expects a Dataset.

The loader already batches, shuffles, shards and prefetches on its own threads, so the DataLoader
around it needs no worker processes and no collation::

    loader = zarrstream.Loader("era5.zarr", ["temperature"], batch_size=16)
    data = torch.utils.data.DataLoader(zarrstream.torch.IterableDataset(loader),
                                       batch_size=None, num_workers=0)
"""

from __future__ import annotations

from typing import Any, Iterator

import torch.utils.data

from ._loader import Loader
from .errors import ConfigError


class IterableDataset(torch.utils.data.IterableDataset):
    """Yields the loader's batches (dicts of tensors); ``len()`` is batches per epoch.

    Use with ``DataLoader(dataset, batch_size=None, num_workers=0)``; any ``num_workers > 0`` is a
    ConfigError saying why: the loader already reads, decodes and assembles batches on its own
    threads, ahead of the training loop and with the GIL released, so worker processes would only
    add a copy of every batch through shared memory (and need a loader each, and a share of the
    samples of their own).
    """

    def __init__(self, loader: Loader) -> None:
        super().__init__()
        self.loader = loader

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        if info is not None:
            raise ConfigError(
                f"zarrstream.torch.IterableDataset in DataLoader(num_workers={info.num_workers}): "
                "use num_workers=0. The zarrstream loader already reads, decodes and assembles "
                "batches on its own threads in this process, prefetching ahead of the training "
                "loop with the GIL released; worker processes would only add a copy of every "
                "batch through shared memory"
            )
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        self.loader.set_epoch(epoch)
