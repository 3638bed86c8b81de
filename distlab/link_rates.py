"""What the calibrated step model moves bytes at over each link: the achieved share of the line rate
(nccl-tests bus bandwidth) and NVLink SHARP's all-reduce rate. Moved out of distlab.efficiency (which re-exports
them). Lesson 7 §8.
"""

from __future__ import annotations

__all__ = [
    "LINK_BUS_BANDWIDTH",
    "FALLBACK_LINK_SHARE",
    "NVLS_BUS_BANDWIDTH",
    "NVLS_MIN_GPUS",
    "achieved_link_share",
    "nvls_bandwidth",
]

#: Achieved large-message all-reduce bus bandwidth per catalog link (nccl-tests busbw, ring algorithm), from the
#: hardware microbenchmarks in distlab/data/published_runs.json (NVIDIA GTC24 S62129, "NCCL Tests Allreduce Bus
#: Bandwidth"): NVLink3 (A100) 232 of 300 GB/s, NVLink4 (H100) 370 of 450, PCIe Gen4 24, Gen5 48, 200 Gb RDMA (IB/RoCE)
#: 24 of 25, 400 Gb RDMA 48 of 50, 100 GbE TCP/IP sockets 10 of 12.5. NVLink5 (B200): the one-node all-reduce of AWS
#: P6-B200 at 16 GiB, 845.67 of 900 (algorithm not stated). XDR (800 Gb) has no figure: the HDR/NDR share (0.96) is
#: assumed. Line rate x this share is what the calibrated step model moves bytes at. Lesson 7 §8.
LINK_BUS_BANDWIDTH = {
    "nvlink3": ("nvidia-gtc24-allreduce-busbw-nvlink3-a100", 232e9),
    "nvlink4": ("nvidia-gtc24-allreduce-busbw-nvlink4-h100", 370e9),
    "nvlink5": ("mlengineering-torch-allreduce-p6-b200-1vs4-nodes", 845.67e9),
    "pcie4": ("nvidia-gtc24-allreduce-busbw-pci-gen4", 24e9),
    "pcie5": ("nvidia-gtc24-allreduce-busbw-pci-gen5", 48e9),
    "ib-hdr": ("nvidia-gtc24-allreduce-busbw-200gb-rdma-ib-roce", 24e9),
    "ib-ndr": ("nvidia-gtc24-allreduce-busbw-400gb-rdma-ib-roce", 48e9),
    "ethernet-100g": ("nvidia-gtc24-allreduce-busbw-100gbe-tcp-ip-sockets", 10e9),
    "ethernet-200g": ("nvidia-gtc24-allreduce-busbw-200gb-rdma-ib-roce", 24e9),
    "ethernet-400g": ("nvidia-gtc24-allreduce-busbw-400gb-rdma-ib-roce", 48e9),
}
#: For a link without a figure (ib-xdr, a custom link): the RDMA share 48 / 50. Lesson 7 §8.
FALLBACK_LINK_SHARE = 48 / 50
#: NVLink SHARP (NVLS): on NVSwitch systems of the H100 generation on, NCCL runs an all-reduce inside a node on the
#: switch, 480 GB/s busbw on H100 (GTC24 S62129, "NVLink4 SHARP (H100)"), and picks it from 5 GPUs up (Bekman's
#: nccl-tests on 8x H200: Ring at 4 GPUs, NVLS at 5-8). Reduce-scatter and all-gather stay on the ring (361-363 GB/s
#: on the same machine). Lesson 7 §8.
NVLS_BUS_BANDWIDTH = {"nvlink4": ("nvidia-gtc24-allreduce-busbw-nvlink4-sharp-h100", 480e9)}
NVLS_MIN_GPUS = 5


def achieved_link_share(link) -> float:
    """Achieved all-reduce bus bandwidth / line rate of a catalog link (name or Link): LINK_BUS_BANDWIDTH's nccl-tests
    figure over the catalog's per-direction rate, at most 1; FALLBACK_LINK_SHARE without a figure. Lesson 7 §8.

    >>> round(achieved_link_share('nvlink3'), 3), round(achieved_link_share('ib-ndr'), 2)  # 232/300, 48/50
    (0.773, 0.96)
    """
    from .hardware import link as catalog_link

    name = str(getattr(link, "name", link)).strip().lower()
    entry = LINK_BUS_BANDWIDTH.get(name)
    if entry is None:
        return FALLBACK_LINK_SHARE
    return min(1.0, entry[1] / catalog_link(name).bandwidth)


def nvls_bandwidth(link):
    """The NVLS all-reduce bus bandwidth of an intra-node link (B/s), None where NCCL has no NVLS. Lesson 7 §8.

    >>> nvls_bandwidth('nvlink4'), nvls_bandwidth('nvlink3')
    (480000000000.0, None)
    """
    entry = NVLS_BUS_BANDWIDTH.get(str(getattr(link, "name", link)).strip().lower())
    return None if entry is None else entry[1]
