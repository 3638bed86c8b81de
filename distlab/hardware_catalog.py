"""The hardware catalog's accelerators and links (ACCELERATORS, LINKS), every figure with its source; distlab.hardware
looks them up and states the conventions (dense peaks, per-direction bandwidths). Lesson 7 §3.
"""

from __future__ import annotations

from .hardware_parts import Accelerator, Link

# ---------------------------------------------------------------------------------------
# Catalogs. Figures: T = 1e12, P = 1e15 FLOP/s; GB = 1e9 bytes, GiB = 2**30 bytes.
#
# Memory: a GPU sold as "80 GB" carries 80 GiB of HBM, and CUDA reports a little less (the driver keeps some).
# memory_bytes is the total CUDA reports where a published log gives it: PyTorch's out-of-memory message "GPU 0 has a
# total capacity of X GiB" prints cudaMemGetInfo's total (c10/cuda/CUDACachingAllocator.cpp); nvidia-smi's
# memory.total counts the driver's share as well and is quoted beside it. Logs of one part differ by about 0.1 GiB
# (driver, ECC): the lowest quoted is stored. A part with no such log keeps its marketed bytes and says so
# (Accelerator.memory_text). memory_label keeps the marketed figure.
_GIB = 2**30  # bytes in a GiB (distlab.units: GiB = 2**30 B); plain floats keep pint out of the import
_NVSMI = (
    "nvidia-smi memory.total as listed in modal-labs/modal-client pull request 2797 (2025-01-23): H100 81,559 MiB, "
    "A100 80GB 81,920 MiB, A100 40GB 40,960 MiB"
)

__all__ = ["ACCELERATORS", "LINKS"]

_SPARSE = "NVIDIA prints tensor-core figures with 2:4 sparsity; the dense figure stored here is half of that"

_A100_FLOPS = {
    "fp64": 19.5e12,  # FP64 tensor core (vector FP64: 9.7)
    "fp32": 19.5e12,
    "tf32": 156e12,  # 312 with sparsity
    "bf16": 312e12,  # 624 with sparsity
    "fp16": 312e12,  # 624 with sparsity
}
_A100_SOURCE = (
    "NVIDIA A100 Tensor Core GPU datasheet and NVIDIA A100 Tensor Core GPU Architecture whitepaper "
    "(2020), spec table, SXM: FP64 Tensor Core 19.5 TFLOPS (FP64 vector 9.7), FP32 19.5, "
    "TF32 156 | 312*, BF16/FP16 312 | 624* TFLOPS (* with sparsity); no FP8. "
)

_H100_SXM_FLOPS = {
    "fp64": 66.9e12,  # FP64 tensor core; datasheet rounds to 67 (vector FP64: 33.5)
    "fp32": 66.9e12,
    "tf32": 494.7e12,  # datasheet: 989* with sparsity
    "bf16": 989.4e12,  # datasheet: 1,979* with sparsity
    "fp16": 989.4e12,
    "fp8": 1978.9e12,  # datasheet: 3,958* with sparsity
}
_H100_SXM_FLOPS_TEXT = (
    "dense FP64 Tensor 66.9, FP32 66.9, TF32 494.7, BF16/FP16 989.4, FP8 1978.9 TFLOPS from the "
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper, Table 3 (H100 SXM5, dense/sparse columns); "
    "the H100/H200 datasheets print the sparse figures 989*, 1,979*, 3,958* (* with sparsity) and "
    "round FP64/FP32 to 67"
)

ACCELERATORS: dict[str, Accelerator] = {
    "a100-40gb": Accelerator(
        "a100-40gb",
        _A100_FLOPS,
        memory_bytes=39.50 * _GIB,
        memory_bandwidth=1555e9,
        source=_A100_SOURCE + "A100 40GB SXM: 40 GB HBM2, 1,555 GB/s. " + _SPARSE + ". Memory visible to CUDA: "
        "39.50 GiB, PyTorch's out-of-memory total on an A100 (TianheWu/CoSeR issue 10, 2025-01-10; 39.59 GiB in "
        "raoyongming/DenseCLIP issue 52, 2024-02-29, a 40 GB A100); " + _NVSMI + ".",
        tdp_w=400,  # A100 SXM datasheet: max TDP 400 W
        memory_label="40 GB HBM2",
        memory_cuda_visible=True,
    ),
    "a100-80gb": Accelerator(
        "a100-80gb",
        _A100_FLOPS,
        memory_bytes=79.25 * _GIB,
        memory_bandwidth=2039e9,
        source=_A100_SOURCE + "A100 80GB SXM: 80 GB HBM2e, 2,039 GB/s (the PCIe card: 1,935 GB/s). " + _SPARSE + ". "
        "Memory visible to CUDA: 79.25 GiB, PyTorch's out-of-memory total on an A100 (levihsu/OOTDiffusion issue 235, "
        "2025-03-17; 79.35 GiB on 2 x A100 80G in Instruction-Tuning-with-GPT-4/GPT-4-LLM issue 16, 2023-04-13); "
        + _NVSMI
        + ".",
        tdp_w=400,  # A100 SXM datasheet: max TDP 400 W
        memory_label="80 GB HBM2e",
        memory_cuda_visible=True,
    ),
    "h100-pcie": Accelerator(
        "h100-pcie",
        {
            "fp64": 51e12,  # FP64 tensor core (vector FP64: 26)
            "fp32": 51e12,
            "tf32": 378e12,  # 756* with sparsity
            "bf16": 756.5e12,  # 1,513* with sparsity
            "fp16": 756.5e12,
            "fp8": 1513e12,  # 3,026* with sparsity
        },
        memory_bytes=80e9,
        memory_bandwidth=2.0e12,
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column: FP64 Tensor Core 51 TFLOPS "
        "(FP64 26), FP32 51, TF32 756*, BF16/FP16 1,513*, FP8 3,026* TFLOPS (* with sparsity; dense "
        "stored = half), 80 GB HBM2e, 2 TB/s. " + _SPARSE + ". Memory: the marketed 80 GB (80e9 B); no published log "
        "naming the PCIe card gives the total CUDA reports.",
        tdp_w=350,  # H100 PCIe datasheet: max TDP 300-350 W
        memory_label="80 GB HBM2e",
    ),
    "h100-sxm": Accelerator(
        "h100-sxm",
        _H100_SXM_FLOPS,
        memory_bytes=79.11 * _GIB,
        memory_bandwidth=3.35e12,
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: 80 GB HBM3, 3.35 TB/s; "
        + _H100_SXM_FLOPS_TEXT
        + ". Memory visible to CUDA: 79.11 GiB, PyTorch's out-of-memory total on an H100 (vllm-project/vllm issue "
        "27508, 2025-10); " + _NVSMI + " (79.65 GiB, the driver's share included).",
        tdp_w=700,  # H100 SXM datasheet: max TDP up to 700 W (configurable)
        memory_label="80 GB HBM3",
        memory_cuda_visible=True,
    ),
    "h200": Accelerator(
        "h200",
        _H100_SXM_FLOPS,
        memory_bytes=141e9,
        memory_bandwidth=4.8e12,
        source="NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: 141 GB HBM3e, 4.8 TB/s; same "
        "tensor-core figures as H100 SXM (TF32 989*, BF16/FP16 1,979*, FP8 3,958* with sparsity), so "
        + _H100_SXM_FLOPS_TEXT
        + ". Memory: the marketed 141 GB (141e9 B); no published log found gives the total CUDA reports.",
        tdp_w=700,  # H200 SXM datasheet: max TDP up to 700 W (configurable)
        memory_label="141 GB HBM3e",
    ),
    "b200": Accelerator(
        "b200",
        {
            "fp64": 37e12,  # FP64 and FP64 tensor core
            "fp32": 75e12,
            "tf32": 1.1e15,  # 2.2* with sparsity
            "bf16": 2.25e15,  # 4.5* with sparsity
            "fp16": 2.25e15,
            "fp8": 4.5e15,  # 9* with sparsity
            "fp4": 9e15,  # 18* with sparsity
        },
        memory_bytes=178.35 * _GIB,
        memory_bandwidth=8e12,
        source="NVIDIA DGX B200 datasheet: 8 GPUs, 72 PFLOPS FP8 training and 144 PFLOPS FP4 inference "
        "(sparse), 1,440 GB HBM3e, 64 TB/s, i.e. per GPU 180 GB and 8 TB/s; per-GPU compute from NVIDIA's "
        "HGX B200 / GB200 NVL72 specification table (HGX B200 column): FP4 18*, FP8/FP6 9*, FP16/BF16 4.5*, "
        "TF32 2.2* PFLOPS (* with sparsity; dense stored = half), FP32 75 TFLOPS, FP64/FP64 Tensor 37 "
        "TFLOPS. Documents differ on memory: that table lists 180 GB at 7.7 TB/s, launch material "
        "quotes 192 GB and 8 TB/s; we use the DGX B200 datasheet (180 GB, 8 TB/s). " + _SPARSE + ". Memory visible "
        "to CUDA: 178.35 GiB (191.5e9 B), cudaDeviceProp totalGlobalMem of an NVIDIA B200 printed in pytorch/ao pull "
        "request 4002 (2026-03-05; printed as 'GB', in GiB: nvidia-smi's 183,359 MiB of a B200 in NVIDIA/TensorRT-LLM "
        "issue 10278 is 179.06 GiB, the driver's share included).",
        tdp_w=1000,  # HGX B200: 1,000 W per GPU
        memory_label="180 GB HBM3e",
        memory_cuda_visible=True,
    ),
    "gb200": Accelerator(
        "gb200",
        {
            "fp64": 40e12,  # FP64 and FP64 tensor core
            "fp32": 80e12,
            "tf32": 1.25e15,  # 2.5* with sparsity
            "bf16": 2.5e15,  # 5* with sparsity
            "fp16": 2.5e15,
            "fp8": 5e15,  # 10* with sparsity
            "fp4": 10e15,  # 20* with sparsity
        },
        memory_bytes=186e9,
        memory_bandwidth=8e12,
        source="One Blackwell GPU of a GB200 superchip (two per superchip, four per NVL72 compute tray): NVIDIA's "
        "HGX B200 / GB200 NVL72 specification table, GB200 NVL72 column, 'Individual Blackwell GPU Specifications': "
        "FP4 20*, FP8/FP6 10*, FP16/BF16 5*, TF32 2.5* PFLOPS (* with sparsity; dense stored = half), FP32 80 TFLOPS, "
        "FP64/FP64 Tensor 40 TFLOPS, 186 GB HBM3E at 8 TB/s, max TDP configurable up to 1,200 W. The same dense "
        "figures per GPU (bf16 2,500, fp8 5,000, fp4 10,000 TFLOPS) and 186 GB at 8.00 TB/s in S. Bekman, ML "
        "Engineering, compute/accelerator/README.md (744d01e), 'NVIDIA GB200 SXM' rows. " + _SPARSE + ". Memory: the "
        "marketed 186 GB (186e9 B); no published log found gives the total CUDA reports.",
        tdp_w=1200,  # GB200 NVL72 column: configurable up to 1,200 W per GPU
        memory_label="186 GB HBM3e",
    ),
    "gb300": Accelerator(
        "gb300",
        {
            "fp32": 80e12,
            "tf32": 1.25e15,
            "bf16": 2.5e15,  # 5* with sparsity
            "fp16": 2.5e15,
            "fp8": 5e15,  # 10* with sparsity
            "fp4": 15e15,  # NVIDIA prints dense NVFP4 itself: 15 (20* sparse is not twice it)
        },
        memory_bytes=288e9,
        memory_bandwidth=8e12,
        source="One Blackwell Ultra GPU of a GB300 NVL72 rack: NVIDIA GB300 NVL72 specifications (rack of 72 GPUs): "
        "FP4 Tensor Core 1,440* | 1,080 PFLOPS (sparse | dense), FP8/FP6 720* PFLOPS, FP16/BF16 360* PFLOPS "
        "(* with sparsity), i.e. per GPU dense FP8 720 / 72 / 2 = 5, BF16 360 / 72 / 2 = 2.5, FP4 1,080 / 72 = 15 "
        "PFLOPS; the same per-GPU dense figures (fp32 80, tf32 1,250, bf16 2,500, fp8 5,000, fp4 15,000 TFLOPS) in "
        "S. Bekman, ML Engineering, compute/accelerator/README.md (744d01e), 'NVIDIA GB300 SXM' row. Memory and "
        "power: NVIDIA Technical Blog, 'Inside NVIDIA Blackwell Ultra: The Chip Powering the AI Factory Era' (a "
        "2025 post): 288 GB HBM3E per GPU, 8 TB/s, 160 SMs, 15 PFLOPS dense NVFP4; 1,400 W per GPU (Verda, 'NVIDIA GB300 NVL72: "
        "GPU Architecture & Performance', per-GPU table: max TDP 1.4 kW). No FP64 figure per GPU is stored (Blackwell "
        "Ultra cuts FP64; the rack table's total is not split here). " + _SPARSE + ". Memory: the marketed 288 GB "
        "(288e9 B; the rack's '20 TB' is 278 GB per GPU); no published log found gives the total CUDA reports.",
        tdp_w=1400,
        memory_label="288 GB HBM3e",
    ),
    "mi300x": Accelerator(
        "mi300x",
        {
            "fp64": 163.4e12,  # FP64 matrix (vector FP64: 81.7)
            "fp32": 163.4e12,
            "tf32": 653.7e12,
            "bf16": 1307.4e12,
            "fp16": 1307.4e12,
            "fp8": 2614.9e12,
        },
        memory_bytes=192e9,
        memory_bandwidth=5.3e12,
        source="AMD Instinct MI300X accelerator data sheet: peak FP64 matrix 163.4 TFLOPS (vector 81.7), "
        "FP32 163.4, TF32 653.7, FP16/BF16 1,307.4, FP8 2,614.9 TFLOPS dense (AMD prints dense; with "
        "sparsity 2x), 192 GB HBM3, 5.3 TB/s. Memory: the marketed 192 GB (192e9 B); no published log found gives "
        "the total HIP reports.",
        tdp_w=750,  # AMD MI300X data sheet: 750 W peak board power
        memory_label="192 GB HBM3",
    ),
}

# Latency alpha: per-step hardware latencies of NCCL's own tuning model (NCCL
# src/graph/tuning.cc, table hwLat, Ring algorithm with the Simple protocol used for large
# messages): NVLink 3.4 us, PCIe 5.7 us, network 9.6 us.
_ALPHA_NOTE = (
    "alpha is a typical software + hardware per-message latency (one ring step) for alpha-beta "
    "models, an estimate: NCCL's tuning model (src/graph/tuning.cc, hwLat, Ring/Simple) uses "
    "{value} us per step for {medium}; small messages with NCCL's LL protocol see less ({ll} us)."
)
_NET_NOTE = (
    _ALPHA_NOTE.format(value=9.6, medium="any network", ll=2.7)
    + " Hardware alone is ~1-2 us port to port (NIC + a switch hop); the rest is protocol and software."
)


def _nvlink(generation: int, bidirectional: float, source: str) -> Link:
    return Link(
        f"nvlink{generation}",
        bandwidth=bidirectional / 2,  # datasheets add both directions
        latency=3.4e-6,
        kind="intra-node",
        source=source,
        note="Per GPU, per direction = half the datasheet's bidirectional total. "
        + _ALPHA_NOTE.format(value=3.4, medium="NVLink", ll=0.47),
    )


def _pcie(generation: int, gigatransfers: float) -> Link:
    # x16 link, 128b/130b encoding, 8 bits per byte, per direction
    return Link(
        f"pcie{generation}",
        bandwidth=gigatransfers * 1e9 * 16 * (128 / 130) / 8,
        latency=5.7e-6,
        kind="intra-node",
        source=f"PCI Express Base Specification {generation}.0: {gigatransfers:g} GT/s per lane, 128b/130b "
        f"encoding; x16 = {gigatransfers:g} x 16 x 128/130 / 8 = "
        f"{gigatransfers * 16 * 128 / 130 / 8:.1f} GB/s per direction",
        note="x16 link, per direction, before packet overhead (achieved ~80-90%). "
        + _ALPHA_NOTE.format(value=5.7, medium="PCIe", ll=1.0),
    )


def _network(name: str, gbit: float, source: str) -> Link:
    return Link(
        name,
        bandwidth=gbit * 1e9 / 8,  # line rate in bits per second -> bytes per second
        latency=9.6e-6,
        kind="inter-node",
        source=source,
        note=f"Per NIC port, per direction: {gbit:g} Gb/s / 8 = {gbit / 8:g} GB/s. " + _NET_NOTE,
    )


LINKS: dict[str, Link] = {
    "nvlink3": _nvlink(
        3,
        600e9,
        "NVIDIA A100 datasheet: third-generation NVLink 600 GB/s per GPU (12 links, 25 GB/s per direction "
        "each); bidirectional total, so 300 GB/s per direction",
    ),
    "nvlink4": _nvlink(
        4,
        900e9,
        "NVIDIA H100 datasheet (SXM): fourth-generation NVLink 900 GB/s per GPU (18 links, 25 GB/s per "
        "direction each); bidirectional total, so 450 GB/s per direction",
    ),
    "nvlink5": _nvlink(
        5,
        1800e9,
        "NVIDIA DGX B200 / HGX B200 datasheets: fifth-generation NVLink 1.8 TB/s per GPU (18 links, 50 GB/s "
        "per direction each); bidirectional total, so 900 GB/s per direction",
    ),
    "pcie4": _pcie(4, 16),
    "pcie5": _pcie(5, 32),
    "ib-hdr": _network(
        "ib-hdr", 200, "InfiniBand HDR (NVIDIA ConnectX-6 / Quantum HDR): 200 Gb/s per port (4 lanes x 50 Gb/s)"
    ),
    "ib-ndr": _network(
        "ib-ndr", 400, "InfiniBand NDR (NVIDIA ConnectX-7 / Quantum-2 NDR): 400 Gb/s per port (4 lanes x 100 Gb/s)"
    ),
    "ib-xdr": _network(
        "ib-xdr", 800, "InfiniBand XDR (NVIDIA ConnectX-8 / Quantum-X800): 800 Gb/s per port (4 lanes x 200 Gb/s)"
    ),
    "ethernet-100g": _network("ethernet-100g", 100, "IEEE 802.3 100 Gigabit Ethernet (RoCE v2): 100 Gb/s per port"),
    "ethernet-200g": _network("ethernet-200g", 200, "IEEE 802.3 200 Gigabit Ethernet (RoCE v2): 200 Gb/s per port"),
    "ethernet-400g": _network("ethernet-400g", 400, "IEEE 802.3 400 Gigabit Ethernet (RoCE v2): 400 Gb/s per port"),
}
