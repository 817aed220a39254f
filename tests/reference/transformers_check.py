#!/usr/bin/env python3
"""The engine's logits against Hugging Face transformers on checkpoints transformers itself wrote.

For Qwen3, Qwen2 and Llama: a small random model built with transformers (seeded, f32), saved with
save_pretrained in f32 and again in bf16, given the tokenizer files of a model-writer model of the same
architecture (same vocabulary size), then run by `engine-logits` on each device and by transformers
(float32, eager attention, on the GPU when there is one) on the same fixed token sequence. Every
position's logits are compared:

    f32 checkpoint:  ||engine - transformers|| / ||transformers|| <= 1e-4
    bf16 checkpoint: <= 2e-2, against transformers on the same bf16 weights read back as float32

Needs torch, transformers, safetensors and numpy; imports nothing of this repository's. Exit status 0
when every comparison passes, 1 otherwise, 2 on a usage error.

    python3 tests/reference/transformers_check.py --engine-logits BIN --model-writer BIN [--devices cuda,cpu]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

# Local directories only: there is no hub to ask, and nothing should try.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

THRESHOLDS = {"f32": 1e-4, "bf16": 2e-2}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
SEQUENCE_LENGTH = 40


def arch_settings(arch, vocab_size, writer_config):
    """transformers config kwargs for a small model of `arch` with the given vocabulary."""
    common = dict(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        bos_token_id=writer_config.get("bos_token_id"),
        eos_token_id=writer_config.get("eos_token_id"),
    )
    if arch == "qwen3":
        # head_dim apart from hidden_size / heads (256 / 8 = 32), as Qwen3 checkpoints have it.
        return "Qwen3Config", "Qwen3ForCausalLM", dict(
            common, head_dim=64, rms_norm_eps=1e-6, tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    if arch == "qwen2":
        # Tied embeddings and q/k/v biases, as the small Qwen2 checkpoints have them.
        return "Qwen2Config", "Qwen2ForCausalLM", dict(
            common, rms_norm_eps=1e-6, tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    if arch == "llama":
        return "LlamaConfig", "LlamaForCausalLM", dict(
            common, max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=False,
            rope_parameters={"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    raise ValueError(arch)


def randomize(model, torch, seed):
    """Weights large enough that every block moves the residual stream and logits spread over several units
    (transformers' own init, std 0.02, leaves attention near uniform and hides errors in it)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                values = 1 + 0.05 * torch.randn(p.shape, generator=generator)
            elif name.endswith(".bias"):
                values = 0.1 * torch.randn(p.shape, generator=generator)
            elif "embed_tokens" in name:
                values = 0.5 * torch.randn(p.shape, generator=generator)
            elif name.startswith("lm_head"):
                values = 0.35 * torch.randn(p.shape, generator=generator)
            else:
                values = torch.randn(p.shape, generator=generator) / p.shape[-1] ** 0.5
            p.copy_(values.to(p.dtype))


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def engine_logits(binary, model_dir, device, tokens, out):
    """The engine's logits (tokens x vocab) or the reason there are none. The KV cache is f32 on every
    device: the CPU's default (f16) alone moves the logits by about 3e-4, past the f32 bound."""
    started = time.monotonic()
    r = run([binary, "--model", str(model_dir), "--device", device, "--tokens", ",".join(map(str, tokens)),
             "--kv-cache-dtype", "float32", "--out", str(out)])
    seconds = time.monotonic() - started
    if r.returncode != 0:
        return None, f"engine-logits exited {r.returncode}: {(r.stderr or r.stdout).strip()[-600:]}", seconds
    return np.fromfile(out, dtype="<f4"), r.stdout.strip(), seconds


def transformers_logits(torch, transformers, model_dir, tokens, device):
    """transformers' own float32 forward of the checkpoint in model_dir (bf16 weights widened exactly)."""
    kwargs = dict(attn_implementation="eager")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, **kwargs)
    except TypeError:  # transformers 4 spells it torch_dtype
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, **kwargs)
    model = model.to(device).eval()
    with torch.no_grad():
        ids = torch.tensor([tokens], dtype=torch.long, device=device)
        logits = model(input_ids=ids, use_cache=False).logits[0]
    out = logits.float().cpu().numpy().astype(np.float64)
    del model, logits
    if device == "cuda":
        torch.cuda.empty_cache()  # the next engine-logits run gets the memory back
    return out


def compare(ours, reference):
    diff = ours.astype(np.float64) - reference
    return float(np.abs(diff).max()), float(np.linalg.norm(diff) / np.linalg.norm(reference))


def check_arch(arch, args, devices, work, torch, transformers, ref_device):
    """Writes the f32 and bf16 checkpoints of `arch` and compares the engine on each device with transformers."""
    writer_dir = work / f"{arch}-writer"
    r = run([args.model_writer, "--arch", arch, "--preset", "tiny", "--out", str(writer_dir)])
    if r.returncode != 0:
        return [(arch, "-", "-", None, None, None, False, f"model-writer: {r.stderr.strip()}")]
    writer_config = json.loads((writer_dir / "config.json").read_text())
    vocab = writer_config["vocab_size"]
    config_class, model_class, settings = arch_settings(arch, vocab, writer_config)

    torch.manual_seed(args.seed)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**settings)).to(torch.float32)
    randomize(model, torch, args.seed)
    checkpoints = {}
    for dtype, torch_dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        checkpoints[dtype] = work / f"{arch}-{dtype}"
        model.to(torch_dtype).save_pretrained(checkpoints[dtype])
        for name in TOKENIZER_FILES:
            shutil.copy(writer_dir / name, checkpoints[dtype] / name)
    del model
    saved = json.loads((checkpoints["f32"] / "config.json").read_text())
    rope_keys = {k: saved[k] for k in ("rope_theta", "rope_scaling", "rope_parameters") if k in saved}
    print(f"{arch}: vocab {vocab}, config.json RoPE keys {json.dumps(rope_keys)}", flush=True)

    # A fixed sequence over the whole vocabulary (special tokens included).
    tokens = [(i * 37 + 11) % vocab for i in range(SEQUENCE_LENGTH)]
    results = []
    for dtype, model_dir in checkpoints.items():
        # The engine first, while torch holds no GPU memory beyond its cache-emptied context.
        ours = {}
        for device in devices:
            out = work / f"{arch}-{dtype}-{device}.f32"
            ours[device] = engine_logits(args.engine_logits, model_dir, device, tokens, out)
        reference = transformers_logits(torch, transformers, model_dir, tokens, ref_device)
        threshold = THRESHOLDS[dtype]
        for device, (values, note, seconds) in ours.items():
            if values is None:
                results.append((arch, dtype, device, None, None, threshold, False, note))
            elif values.size != reference.size:
                results.append((arch, dtype, device, None, None, threshold, False,
                                f"{values.size} values, transformers gave {reference.shape}"))
            else:
                max_abs, rel = compare(values.reshape(reference.shape), reference)
                results.append((arch, dtype, device, max_abs, rel, threshold, rel <= threshold,
                                f"{note}; {seconds:.1f} s"))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine-logits", required=True, help="the engine-logits binary")
    parser.add_argument("--model-writer", required=True, help="the model-writer binary (for tokenizer files)")
    parser.add_argument("--devices", default="cuda,cpu", help="engine devices, comma-separated (default cuda,cpu)")
    parser.add_argument("--archs", default="qwen3,qwen2,llama")
    parser.add_argument("--work", help="keep the models in this directory (default: a temporary one, removed)")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    devices = [d for d in args.devices.split(",") if d]
    archs = [a for a in args.archs.split(",") if a]

    import torch
    import transformers

    # Full float32 matmuls on the GPU (torch's default, made sure of): TF32 would round the reference's own
    # products to 10 mantissa bits.
    torch.set_float32_matmul_precision("highest")
    ref_device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, numpy {np.__version__}; "
          f"reference on {ref_device}"
          + (f" ({torch.cuda.get_device_name(0)})" if ref_device == "cuda" else " (no GPU visible to torch)"),
          flush=True)

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="transformers-check-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []  # (arch, dtype, device, max_abs, rel, threshold, ok, note)
    try:
        for arch in archs:
            try:
                results += check_arch(arch, args, devices, work, torch, transformers, ref_device)
            except Exception as e:  # one architecture's failure must not hide the others' results
                traceback.print_exc()
                note = f"{type(e).__name__}: {str(e).strip()[-600:]}"
                results.append((arch, "-", "-", None, None, None, False, note))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\n{'arch':6} {'ckpt':5} {'device':6} {'max abs':>10} {'relative':>10} {'bound':>7}  result")
    for arch, dtype, device, max_abs, rel, threshold, ok, note in results:
        numbers = (f"{max_abs:10.3e} {rel:10.3e}" if rel is not None else f"{'-':>10} {'-':>10}")
        bound = f"{threshold:7.0e}" if threshold is not None else f"{'-':>7}"
        print(f"{arch:6} {dtype:5} {device:6} {numbers} {bound}  {'PASS' if ok else 'FAIL'}  {note}")
    failed = sum(1 for r in results if not r[6])
    print(f"\n{len(results) - failed} of {len(results)} comparisons pass")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
