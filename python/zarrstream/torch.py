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


class IterableDataset(torch.utils.data.IterableDataset):
    """Yields the loader's batches (dicts of tensors); ``len()`` is batches per epoch.

    Use with ``DataLoader(dataset, batch_size=None, num_workers=0)``: worker processes would each
    run a copy of the loader (and every sample once per worker).
    """

    def __init__(self, loader: Loader) -> None:
        super().__init__()
        self.loader = loader

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError(
                "zarrstream.torch.IterableDataset runs its own threads: use DataLoader(..., "
                "num_workers=0); worker processes would each yield every sample"
            )
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        self.loader.set_epoch(epoch)
