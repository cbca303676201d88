"""Generate gemmlab's public GEMM shape set with its fixed train/test split (issue 41, item 4).

    python -m gemmlab.dispatch.make_shapeset            # rewrite gemmlab/data/shapeset.yaml
    python -m gemmlab.dispatch.make_shapeset --check    # exit 1 if the committed file differs

Deterministic: no clock, no randomness, no network; the same script always writes the same bytes
(tests/test_shapeset.py regenerates it and compares). Read by :mod:`gemmlab.dispatch.shapeset`;
gemmlab/data/README.md documents the sources, the generation and the split rule.

**GEMM convention.** A linear layer ``y = x W^T`` with ``in_features`` = K and ``out_features`` = N
is C[M, N] = A[M, K] · B[K, N] with M the number of rows of ``x`` (tokens, images x patches, or a
batch), as in gemmlab (``shape: [M, N, K]``). Fused projections are one GEMM, as inference engines
(vLLM, TensorRT-LLM) run them: ``qkv`` has N = (heads + 2 * kv_heads) * head_dim, ``mlp_gate_up`` has
N = 2 * intermediate_size (the SwiGLU gate and up projections side by side).

**M.** LLM layers take M from the token counts ``M_SET`` (1 … 16384: decode batches to long
prefills); an MoE expert's M is the number of tokens routed to that expert. Each (model, layer)
keeps about a third of ``M_SET`` (positions rotating from layer to layer, so the set as a whole covers
every M) plus the largest M under the caps. Vision layers take M = tokens per image x batch
(batch 1 … 64), classifier/projection heads M = batch. A shape is kept only if M·N·K <= ``MAX_MNK``
(2^38 multiply-adds: ~11 ms for an H100 at 50 TFLOP/s of FP32, so one benchmark point stays well
under 50 ms a launch) and A and B each hold at most ``MAX_OPERAND`` = 2^28 elements (1 GiB as
float32: inputs are drawn and checked on the host, which costs more than the GPU time for a larger
B). A weight over that cap (LM heads of large vocabularies, the 70B models' MLPs) is taken as its
tensor-parallel shard, as those models are served: N / tp for a column-parallel layer, K / tp for a
row-parallel one, tp the smallest of 2, 4, 8 that fits (layer ``lm_head_tp2`` ...).

**Split** (fixed before any tuning; see :func:`assign_splits`): whole model families are held out.
Within each category (dense LLM, MoE LLM, vision, recommendation, in that order) the families are
ordered by ``sha256(SPLIT_SALT + family)`` and alternate between train and test, the first family of
the 1st and 3rd categories in train, of the 2nd and 4th in test (so odd-sized categories do not all
tip the same way). Then every test shape whose weight matrix (N, K) also occurs in a train shape, or
in the 45-shape suite kernel=auto was tuned on (``SUITE_WEIGHTS``), moves to train: the test split
holds only weight matrices that tuning never saw. The odd/adversarial shapes are split per weight: within
each kind, their distinct (N, K) ordered by ``sha256(SPLIT_SALT + "NxK")`` alternate test, train, ...
(they are not correlated like one model's layers, and every kind should be in both parts).
"""

from __future__ import annotations

from types import MappingProxyType

import argparse
import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

OUT_FILE = Path(__file__).resolve().parents[1] / "data" / "shapeset.yaml"  # gemmlab/data/shapeset.yaml
SCHEMA = "gemmlab.shapeset/1"
SPLIT_SALT = "gemmlab-shapeset-v1:"
M_SET = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
M_STRIDE = 5  # keep every fifth M of M_SET per (model, layer), rotating
IMAGE_BATCHES = (1, 2, 4, 8, 16, 32, 64)
VISION_STRIDE = 3  # every third batch size per (model, layer), rotating
MAX_MNK = 2 ** 38
MAX_OPERAND = 2 ** 28  # 268,435,456 elements = 1 GiB as float32
CATEGORIES = ("dense_llm", "moe_llm", "vision", "recsys")
# The weight matrices (N, K) of the 45-shape suite (gemmlab/data/shape_suite.yaml, issue 10) as of this
# split: kernel=auto's rules and the shipped H200 table were tuned on them, so they count as train.
SUITE_WEIGHTS = frozenset({
    (1, 1), (16, 16), (32, 32), (64, 64), (79, 19), (128, 128), (128, 256), (256, 256), (256, 65536),
    (512, 16384), (1024, 1024), (1024, 32768), (1025, 513), (2048, 2048), (3000, 777), (4096, 8), (4096, 32),
    (4096, 4096), (4096, 14336), (4097, 1023), (8192, 16), (8192, 8192), (11008, 4096), (32768, 256),
    (65536, 64)})


# --- the published configurations ------------------------------------------------------------------
# Every constant below is copied from the cited config.json / model card / reference script.

@dataclass(frozen=True)
class Llm:
    """A decoder-only transformer's GEMM-relevant config.json fields."""

    name: str
    source: str
    hidden: int
    intermediate: int  # dense MLP width (0: none)
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    experts: int = 0  # routed experts (0: dense)
    moe_intermediate: int = 0  # one expert's MLP width
    shared_intermediate: int = 0  # shared experts' total MLP width (DeepSeek)


LLAMA3_8B = Llm("Llama-3-8B", "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
                hidden=4096, intermediate=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256)
LLAMA3_70B = Llm("Llama-3-70B", "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json",
                 hidden=8192, intermediate=28672, heads=64, kv_heads=8, head_dim=128, vocab=128256)
LLAMA32_1B = Llm("Llama-3.2-1B", "https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json",
                 hidden=2048, intermediate=8192, heads=32, kv_heads=8, head_dim=64, vocab=128256)
MISTRAL_7B = Llm("Mistral-7B-v0.1", "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
                 hidden=4096, intermediate=14336, heads=32, kv_heads=8, head_dim=128, vocab=32000)
QWEN25_1_5B = Llm("Qwen2.5-1.5B", "https://huggingface.co/Qwen/Qwen2.5-1.5B/blob/main/config.json",
                  hidden=1536, intermediate=8960, heads=12, kv_heads=2, head_dim=128, vocab=151936)
QWEN25_7B = Llm("Qwen2.5-7B", "https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json",
                hidden=3584, intermediate=18944, heads=28, kv_heads=4, head_dim=128, vocab=152064)
QWEN25_72B = Llm("Qwen2.5-72B", "https://huggingface.co/Qwen/Qwen2.5-72B/blob/main/config.json",
                 hidden=8192, intermediate=29568, heads=64, kv_heads=8, head_dim=128, vocab=152064)
GEMMA2_2B = Llm("Gemma-2-2B", "https://huggingface.co/google/gemma-2-2b/blob/main/config.json",
                hidden=2304, intermediate=9216, heads=8, kv_heads=4, head_dim=256, vocab=256000)
GEMMA2_9B = Llm("Gemma-2-9B", "https://huggingface.co/google/gemma-2-9b/blob/main/config.json",
                hidden=3584, intermediate=14336, heads=16, kv_heads=8, head_dim=256, vocab=256000)
PHI3_MINI = Llm("Phi-3-mini-4k", "https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/blob/main/config.json",
                hidden=3072, intermediate=8192, heads=32, kv_heads=32, head_dim=96, vocab=32064)
PHI3_MEDIUM = Llm("Phi-3-medium-4k", "https://huggingface.co/microsoft/Phi-3-medium-4k-instruct/blob/main/config.json",
                  hidden=5120, intermediate=17920, heads=40, kv_heads=10, head_dim=128, vocab=32064)
MIXTRAL = Llm("Mixtral-8x7B", "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json",
              hidden=4096, intermediate=0, heads=32, kv_heads=8, head_dim=128, vocab=32000,
              experts=8, moe_intermediate=14336)
QWEN3_30B = Llm("Qwen3-30B-A3B", "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
                hidden=2048, intermediate=0, heads=32, kv_heads=4, head_dim=128, vocab=151936,
                experts=128, moe_intermediate=768)
QWEN3_235B = Llm("Qwen3-235B-A22B", "https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json",
                 hidden=4096, intermediate=0, heads=64, kv_heads=4, head_dim=128, vocab=151936,
                 experts=128, moe_intermediate=1536)
# DeepSeek-V3 (https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json): hidden_size 7168,
# intermediate_size 18432 (the first_k_dense_replace = 3 dense layers), moe_intermediate_size 2048,
# n_routed_experts 256, n_shared_experts 1, num_attention_heads 128, q_lora_rank 1536, kv_lora_rank 512,
# qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, vocab_size 129280. Multi-head latent attention
# (MLA): q_a_proj 7168 -> 1536, q_b_proj 1536 -> 128 * (128 + 64), kv_a_proj_with_mqa 7168 -> 512 + 64,
# kv_b_proj 512 -> 128 * (128 + 128), o_proj 128 * 128 -> 7168 (modeling_deepseek.py of the same repository).
DEEPSEEK_V3 = "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json"
DSV3 = MappingProxyType(dict(hidden=7168, intermediate=18432, moe_intermediate=2048, experts=256, shared=1, heads=128,
            q_lora=1536, kv_lora=512, qk_nope=128, qk_rope=64, v_head=128, vocab=129280))


@dataclass(frozen=True)
class Vit:
    """A ViT encoder: tokens per image = (image / patch)^2 (+1 class token)."""

    name: str
    source: str
    hidden: int
    intermediate: int
    patch: int
    image: int
    channels: int = 3
    cls_token: bool = True
    labels: int = 0  # classifier head (0: none)
    projection: int = 0  # CLIP projection into the joint space (0: none)

    @property
    def tokens(self) -> int:
        return (self.image // self.patch) ** 2 + (1 if self.cls_token else 0)


VIT_B16 = Vit("ViT-B/16", "https://huggingface.co/google/vit-base-patch16-224/blob/main/config.json",
              hidden=768, intermediate=3072, patch=16, image=224, labels=1000)
VIT_L16 = Vit("ViT-L/16", "https://huggingface.co/google/vit-large-patch16-224/blob/main/config.json",
              hidden=1024, intermediate=4096, patch=16, image=224, labels=1000)
CLIP_L14 = Vit("CLIP-ViT-L/14", "https://huggingface.co/openai/clip-vit-large-patch14/blob/main/config.json "
               "(vision_config)", hidden=1024, intermediate=4096, patch=14, image=224, projection=768)
CLIP_B16 = Vit("CLIP-ViT-B/16", "https://huggingface.co/openai/clip-vit-base-patch16/blob/main/config.json "
               "(vision_config)", hidden=768, intermediate=3072, patch=16, image=224, projection=512)
# CLIP text towers (text_config of the same files): 77 tokens, hidden / intermediate / projection_dim
CLIP_TEXT = (("CLIP-ViT-L/14-text", CLIP_L14.source.replace("vision_config", "text_config"), 768, 3072, 768),
             ("CLIP-ViT-B/16-text", CLIP_B16.source.replace("vision_config", "text_config"), 512, 2048, 512))
CLIP_TEXT_TOKENS = 77

# DLRM, MLPerf Training's recommendation benchmark on Criteo Terabyte (facebookresearch/dlrm,
# bench/run_and_time.sh: --arch-sparse-feature-size=128 --arch-mlp-bot="13-512-256-128"
# --arch-mlp-top="1024-1024-512-256-1"; 26 sparse features, dot interaction: the top MLP's input is
# 27 * 26 / 2 + 128 = 479).
DLRM_SOURCE = "https://github.com/facebookresearch/dlrm/blob/main/bench/run_and_time.sh"
DLRM_BOTTOM = (13, 512, 256, 128)
DLRM_TOP = (479, 1024, 1024, 512, 256, 1)
# DLRM-DCNv2, MLPerf Training v3.0+ (mlcommons/training recommendation_v2/torchrec_dlrm: --embedding_dim 128
# --dense_arch_layer_sizes 512,256,128 --over_arch_layer_sizes 1024,1024,512,256,1 --dcn_num_layers 3
# --dcn_low_rank_dim 512): the cross network works on the 27 * 128 = 3456 concatenated features.
DCN_SOURCE = "https://github.com/mlcommons/training/tree/master/recommendation_v2/torchrec_dlrm"
DCN_IN, DCN_RANK = 3456, 512
DCN_TOP = (3456, 1024, 1024, 512, 256, 1)
RECSYS_M = M_SET  # the batch

GPT2 = ("https://huggingface.co/openai-community/gpt2/blob/main/config.json (n_embd 768), "
        "https://huggingface.co/openai-community/gpt2-medium/blob/main/config.json (n_embd 1024); vocab_size 50257")


# --- the shapes --------------------------------------------------------------------------------------

@dataclass
class Row:
    """One generated shape with its provenance (before de-duplication)."""

    M: int
    N: int
    K: int
    family: str
    model: str
    layer: str
    category: str
    kind: str = ""  # odd shapes: what makes them adversarial
    split: str = ""
    also: list = field(default_factory=list)  # other (model, layer) pairs with the same [M, N, K]

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.M, self.N, self.K)


def fits(m: int, n: int, k: int) -> bool:
    """Within the caps: M·N·K <= MAX_MNK and A (M x K), B (K x N) each <= MAX_OPERAND elements."""
    return m * n * k <= MAX_MNK and m * k <= MAX_OPERAND and k * n <= MAX_OPERAND


class Maker:
    """Collects rows; ``pick`` chooses the M values of one (model, layer)."""

    def __init__(self):
        self.rows: list[Row] = []
        self.turn = 0  # rotates the M positions from layer to layer

    def pick(self, n: int, k: int, ms=M_SET, stride: int = M_STRIDE) -> list[int]:
        allowed = [m for m in ms if fits(m, n, k)]
        if not allowed:
            return []
        chosen = [m for i, m in enumerate(ms) if (i + self.turn) % stride == 0 and m in allowed]
        self.turn += 1
        if allowed[-1] not in chosen:  # the largest M under the caps: every layer has its prefill point
            chosen.append(allowed[-1])
        return chosen

    def layer(self, family: str, category: str, model: str, layer: str, n: int, k: int, ms=M_SET,
              stride: int = M_STRIDE, parallel: str = "") -> None:
        """One layer's shapes. A weight over ``MAX_OPERAND`` elements is taken as its tensor-parallel
        shard, as such models run (Megatron-LM, vLLM): N / tp for a column-parallel layer
        (``parallel="col"``: qkv, gate_up, lm_head), K / tp for a row-parallel one (``"row"``), with the
        smallest tp of 2, 4, 8 that fits; the layer is then named ``<layer>_tp<tp>``."""
        if k * n > MAX_OPERAND:
            cut = n if parallel == "col" else k if parallel == "row" else 0
            tp = next((tp for tp in (2, 4, 8) if cut % tp == 0 and k * n // tp <= MAX_OPERAND), 0) if cut else 0
            if not tp:
                return
            n, k, layer = (n // tp, k, f"{layer}_tp{tp}") if parallel == "col" else (n, k // tp, f"{layer}_tp{tp}")
        for m in self.pick(n, k, ms, stride):
            self.rows.append(Row(m, n, k, family, model, layer, category))

    def llm(self, family: str, cfg: Llm) -> None:
        category = "moe_llm" if cfg.experts else "dense_llm"
        q = cfg.heads * cfg.head_dim
        self.layer(family, category, cfg.name, "qkv", q + 2 * cfg.kv_heads * cfg.head_dim, cfg.hidden, parallel="col")
        self.layer(family, category, cfg.name, "attn_out", cfg.hidden, q, parallel="row")
        if cfg.intermediate:
            self.layer(family, category, cfg.name, "mlp_gate_up", 2 * cfg.intermediate, cfg.hidden, parallel="col")
            self.layer(family, category, cfg.name, "mlp_down", cfg.hidden, cfg.intermediate, parallel="row")
        if cfg.experts:
            self.layer(family, category, cfg.name, "router", cfg.experts, cfg.hidden)
            self.layer(family, category, cfg.name, "expert_gate_up", 2 * cfg.moe_intermediate, cfg.hidden, parallel="col")
            self.layer(family, category, cfg.name, "expert_down", cfg.hidden, cfg.moe_intermediate, parallel="row")
        # LM head: fewer M points (the largest B matrices of the set)
        self.layer(family, category, cfg.name, "lm_head", cfg.vocab, cfg.hidden, stride=2 * M_STRIDE, parallel="col")

    def deepseek_v3(self, family: str) -> None:
        d, name, cat = DSV3, "DeepSeek-V3", "moe_llm"
        self.layer(family, cat, name, "q_a_proj", d["q_lora"], d["hidden"])
        self.layer(family, cat, name, "q_b_proj", d["heads"] * (d["qk_nope"] + d["qk_rope"]), d["q_lora"])
        self.layer(family, cat, name, "kv_a_proj", d["kv_lora"] + d["qk_rope"], d["hidden"])
        self.layer(family, cat, name, "kv_b_proj", d["heads"] * (d["qk_nope"] + d["v_head"]), d["kv_lora"])
        self.layer(family, cat, name, "attn_out", d["hidden"], d["heads"] * d["v_head"])
        self.layer(family, cat, name, "mlp_gate_up", 2 * d["intermediate"], d["hidden"], parallel="col")  # layers 0-2
        self.layer(family, cat, name, "mlp_down", d["hidden"], d["intermediate"], parallel="row")
        self.layer(family, cat, name, "router", d["experts"], d["hidden"])
        self.layer(family, cat, name, "expert_gate_up", 2 * d["moe_intermediate"], d["hidden"])
        self.layer(family, cat, name, "expert_down", d["hidden"], d["moe_intermediate"])
        self.layer(family, cat, name, "lm_head", d["vocab"], d["hidden"], stride=2 * M_STRIDE, parallel="col")

    def vit(self, family: str, cfg: Vit) -> None:
        tok = [cfg.tokens * b for b in IMAGE_BATCHES]
        patches = [(cfg.image // cfg.patch) ** 2 * b for b in IMAGE_BATCHES]
        h, cat = cfg.hidden, "vision"
        self.layer(family, cat, cfg.name, "patch_embed", h, cfg.channels * cfg.patch ** 2, patches, VISION_STRIDE)
        self.layer(family, cat, cfg.name, "qkv", 3 * h, h, tok, VISION_STRIDE)
        self.layer(family, cat, cfg.name, "attn_out", h, h, tok, VISION_STRIDE)
        self.layer(family, cat, cfg.name, "mlp_fc1", cfg.intermediate, h, tok, VISION_STRIDE)
        self.layer(family, cat, cfg.name, "mlp_fc2", h, cfg.intermediate, tok, VISION_STRIDE)
        if cfg.labels:
            self.layer(family, cat, cfg.name, "classifier", cfg.labels, h, IMAGE_BATCHES, VISION_STRIDE)
        if cfg.projection:
            self.layer(family, cat, cfg.name, "projection", cfg.projection, h, IMAGE_BATCHES, VISION_STRIDE)

    def clip_text(self, family: str, name: str, hidden: int, intermediate: int, projection: int) -> None:
        tok = [CLIP_TEXT_TOKENS * b for b in IMAGE_BATCHES]
        cat = "vision"
        self.layer(family, cat, name, "qkv", 3 * hidden, hidden, tok, VISION_STRIDE)
        self.layer(family, cat, name, "attn_out", hidden, hidden, tok, VISION_STRIDE)
        self.layer(family, cat, name, "mlp_fc1", intermediate, hidden, tok, VISION_STRIDE)
        self.layer(family, cat, name, "mlp_fc2", hidden, intermediate, tok, VISION_STRIDE)
        self.layer(family, cat, name, "projection", projection, hidden, IMAGE_BATCHES, VISION_STRIDE)

    def mlp(self, family: str, model: str, prefix: str, widths) -> None:
        for i, (k, n) in enumerate(zip(widths, widths[1:])):
            self.layer(family, "recsys", model, f"{prefix}{i}", n, k, RECSYS_M)

    def odd(self, kind: str, shapes, model: str = "synthetic") -> None:
        for m, n, k in shapes:
            self.rows.append(Row(m, n, k, "odd", model, kind, "odd", kind=kind))


# Odd and adversarial shapes, by kind (each kind has >= 2 shapes: the split puts every kind in both parts).
ODD = MappingProxyType({
    "primes": [(127, 131, 137), (251, 509, 1021), (1009, 2003, 4001), (4093, 4099, 1019), (8191, 127, 2039),
               (97, 8209, 3001), (2039, 1021, 8191), (61, 67, 71)],
    "gemv_row": [(1, 50000, 1000), (1, 1, 65536), (1, 3001, 1337), (1, 100003, 64), (1, 24000, 11000)],
    "gemv_col": [(4096, 1, 4096), (65536, 1, 256), (1000, 1, 10000), (30000, 1, 999)],
    "tiny_out_huge_k": [(2, 2, 100000), (1, 1, 131072), (4, 4, 65536), (8, 3, 50000), (16, 16, 262144),
                        (3, 7, 1000003)],
    "k_tiny": [(4096, 4096, 1), (8192, 8192, 2), (1024, 4096, 3), (16384, 1024, 4), (3000, 5000, 7),
               (12345, 6789, 5)],
    "k_unaligned": [(512, 512, 1001), (2048, 2048, 2047), (4096, 1024, 4100), (777, 3333, 1234),
                    (128, 4096, 4097), (64, 8192, 3003)],
    "n_unaligned": [(4096, 4097, 4096), (1024, 1023, 1024), (2000, 7001, 512), (32, 11111, 2048),
                    (8, 8193, 4096)],
    "tall_skinny": [(100000, 16, 64), (262144, 8, 8), (65537, 33, 17), (50000, 3, 3000)],
    "short_wide": [(3, 100003, 64), (7, 65521, 128), (2, 262144, 32), (5, 40000, 999)],
    "degenerate": [(1, 1, 1), (2, 2, 2), (3, 5, 7), (1, 2, 3), (2, 1, 1), (1, 17, 1)],
})
# real vocabularies that are not a multiple of 8 (GPT-2's 50257): an LM head no tile divides
# (GPT-2 n_embd 768 and GPT-2 medium n_embd 1024, both vocab_size 50257)
ODD_REAL = MappingProxyType({"odd_vocab": ((1, 50257, 768), (333, 50257, 768), (64, 50257, 1024), (2048, 50257, 1024))})


def families() -> dict[str, dict]:
    """family -> {category, models: [(name, source)]}: the split units, in generation order."""
    return {
        "llama3": {"category": "dense_llm", "models": [LLAMA3_8B, LLAMA3_70B, LLAMA32_1B]},
        "qwen2.5": {"category": "dense_llm", "models": [QWEN25_1_5B, QWEN25_7B, QWEN25_72B]},
        "gemma2": {"category": "dense_llm", "models": [GEMMA2_2B, GEMMA2_9B]},
        "phi3": {"category": "dense_llm", "models": [PHI3_MINI, PHI3_MEDIUM]},
        "mistral": {"category": "moe_llm", "models": [MIXTRAL, MISTRAL_7B]},
        "deepseek_v3": {"category": "moe_llm", "models": ["DeepSeek-V3"]},
        "qwen3_moe": {"category": "moe_llm", "models": [QWEN3_30B, QWEN3_235B]},
        "vit": {"category": "vision", "models": [VIT_B16, VIT_L16]},
        "clip": {"category": "vision", "models": [CLIP_L14, CLIP_B16, *CLIP_TEXT]},
        "dlrm": {"category": "recsys", "models": ["DLRM"]},
        "dlrm_dcnv2": {"category": "recsys", "models": ["DLRM-DCNv2"]},
    }


def sources() -> dict[str, str]:
    """model name -> where its constants come from."""
    out = {}
    for fam in families().values():
        for m in fam["models"]:
            if isinstance(m, (Llm, Vit)):
                out[m.name] = m.source
            elif isinstance(m, tuple):
                out[m[0]] = m[1]
    out.update({"DeepSeek-V3": DEEPSEEK_V3, "DLRM": DLRM_SOURCE, "DLRM-DCNv2": DCN_SOURCE, "GPT-2": GPT2,
                "synthetic": "adversarial shapes written for this set (make_shapeset.ODD)"})
    return out


def generate() -> list[Row]:
    """Every shape row, before the split and de-duplication, in a fixed order."""
    mk = Maker()
    for family, spec in families().items():
        for model in spec["models"]:
            if isinstance(model, Llm):
                mk.llm(family, model)
            elif isinstance(model, Vit):
                mk.vit(family, model)
            elif isinstance(model, tuple):
                mk.clip_text(family, *[model[0], *model[2:]])
            elif model == "DeepSeek-V3":
                mk.deepseek_v3(family)
            elif model == "DLRM":
                mk.mlp(family, model, "bottom_mlp", DLRM_BOTTOM)
                mk.mlp(family, model, "top_mlp", DLRM_TOP)
            elif model == "DLRM-DCNv2":
                mk.mlp(family, model, "bottom_mlp", DLRM_BOTTOM)
                mk.layer(family, "recsys", model, "dcn_down", DCN_RANK, DCN_IN, RECSYS_M)  # x -> rank 512
                mk.layer(family, "recsys", model, "dcn_up", DCN_IN, DCN_RANK, RECSYS_M)  # rank 512 -> x
                mk.mlp(family, model, "top_mlp", DCN_TOP)
    for kind, shapes in ODD.items():
        mk.odd(kind, shapes)
    for kind, shapes in ODD_REAL.items():
        mk.odd(kind, shapes, model="GPT-2")
    bad = [r for r in mk.rows if not fits(r.M, r.N, r.K)]
    assert not bad, f"over the caps: {bad[:3]}"
    return mk.rows


def _rank(text: str) -> str:
    return hashlib.sha256((SPLIT_SALT + text).encode()).hexdigest()


def family_splits() -> dict[str, str]:
    """family -> "train" | "test": within each category (``CATEGORIES``, index c), ordered by
    sha256(SPLIT_SALT + name), the i-th family is train where i + c is even, else test."""
    out = {}
    fams = families()
    for c, cat in enumerate(CATEGORIES):
        names = sorted((f for f, spec in fams.items() if spec["category"] == cat), key=_rank)
        for i, name in enumerate(names):
            out[name] = "train" if (i + c) % 2 == 0 else "test"
    return out


def assign_splits(rows: list[Row]) -> list[Row]:
    """Split, then de-duplicate: returns one row per [M, N, K] with ``split`` set.

    1. model shapes take their family's split (:func:`family_splits`);
    2. odd shapes: within each kind, their distinct weights (N, K) ordered by sha256(SPLIT_SALT + "NxK"):
       test, train, test, ... (every shape of one weight on the same side);
    3. a test shape whose weight matrix (N, K) occurs in any train shape, or in the 45-shape suite
       that kernel=auto was tuned on (``SUITE_WEIGHTS``), becomes train;
    4. duplicates [M, N, K] collapse into the first row (its other sources listed in ``also``),
       train if any of them is train.
    """
    fam = family_splits()
    for r in rows:
        if r.category != "odd":
            r.split = fam[r.family]
    kinds: dict[str, list[Row]] = {}
    for r in rows:
        if r.category == "odd":
            kinds.setdefault(r.kind, []).append(r)
    for group in kinds.values():
        weights = sorted({(r.N, r.K) for r in group}, key=lambda w: _rank(f"{w[0]}x{w[1]}"))
        side = {w: "test" if i % 2 == 0 else "train" for i, w in enumerate(weights)}
        for r in group:
            r.split = side[(r.N, r.K)]
    train_weights = {(r.N, r.K) for r in rows if r.split == "train"} | SUITE_WEIGHTS
    for r in rows:
        if r.split == "test" and (r.N, r.K) in train_weights:
            r.split = "train"
    out: dict[tuple, Row] = {}
    for r in rows:
        first = out.get(r.key)
        if first is None:
            out[r.key] = r
            continue
        first.also.append((r.model, r.layer))
        if r.split == "train":
            first.split = "train"
    return list(out.values())


def region(m: int, category: str) -> str:
    """``decode`` (M <= 64), ``medium`` (64 < M <= 1024), ``large`` (M > 1024), or ``odd`` (the
    adversarial shapes, whatever their M). The same rule as :func:`gemmlab.dispatch.shapeset.region_of`."""
    if category == "odd":
        return "odd"
    return "decode" if m <= 64 else "medium" if m <= 1024 else "large"


def render(rows: list[Row]) -> str:
    """The YAML text of the set (one flow mapping per shape, so a diff shows one line per change)."""
    src = sources()
    fam = family_splits()
    counts: dict[tuple, int] = {}
    for r in rows:
        key = (r.split, region(r.M, r.category))
        counts[key] = counts.get(key, 0) + 1
    lines = [
        "# gemmlab's public GEMM shape set with its fixed train/test split (issue 41, item 4).",
        "# GENERATED by gemmlab/dispatch/make_shapeset.py: do not edit by hand (tests/test_shapeset.py regenerates it",
        "# and holds a hash of the test split). gemmlab/data/README.md: sources, generation, split rule.",
        "# [M, N, K]: A is M x K, B is K x N, C is M x N. region: decode M <= 64, medium 64 < M <= 1024,",
        "# large M > 1024, odd = adversarial shapes. Tune and fit only on train; report on test.",
        "# counts: " + ", ".join(f"{s} {sum(v for (sp, _), v in counts.items() if sp == s)}" for s in ("train", "test"))
        + "; " + "; ".join(f"{s}: " + " ".join(f"{g} {counts.get((s, g), 0)}" for g in ("decode", "medium", "large", "odd"))
                          for s in ("train", "test")),
        f"schema: {SCHEMA}",
        "split_rule: >-",
        "  whole model families held out: per category, families ordered by sha256('" + SPLIT_SALT + "' + family)",
        "  alternate (train first in the 1st and 3rd category); a test shape whose (N, K) weight occurs in train or in the",
        "  45-shape suite (shape_suite.yaml) moves to train;",
        "  odd shapes: per kind, their weights (N, K) ordered by sha256('" + SPLIT_SALT + "' + 'NxK') alternate test, train",
        "families:",
    ]
    for name, spec in families().items():
        lines.append(f"  {name}: {{category: {spec['category']}, split: {fam[name]}}}")
    lines.append("  odd: {category: odd, split: per-shape}")
    lines.append("sources:")
    for model in sorted({r.model for r in rows} | {a[0] for r in rows for a in r.also}):
        lines.append(f"  {_q(model)}: {_q(src[model])}")
    lines.append("shapes:")
    for r in rows:
        also = f", also: [{', '.join(_q(f'{m} {layer}') for m, layer in r.also)}]" if r.also else ""
        lines.append(f"  - {{M: {r.M}, N: {r.N}, K: {r.K}, split: {r.split}, region: {region(r.M, r.category)}, "
                     f"family: {r.family}, model: {_q(r.model)}, layer: {r.layer}{also}}}")
    return "\n".join(lines) + "\n"


def _q(text: str) -> str:
    """A YAML flow-safe scalar: quoted where it holds anything but [A-Za-z0-9._-]."""
    import re
    return text if re.fullmatch(r"[A-Za-z][A-Za-z0-9._-]*", text) else '"' + text.replace('"', '\\"') + '"'


def build() -> str:
    """The file's text (what ``main`` writes)."""
    return render(assign_splits(generate()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed file differs from the output")
    ap.add_argument("--out", type=Path, default=OUT_FILE)
    args = ap.parse_args(argv)
    text = build()
    if args.check:
        same = args.out.is_file() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'DIFFERS from make_shapeset.py output'}")
        return 0 if same else 1
    args.out.write_text(text)
    print(f"wrote {args.out}: {text.count(chr(10) + '  - ')} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
