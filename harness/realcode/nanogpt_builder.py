"""A harness/measure_torch.py builder for karpathy/nanoGPT's model.py, which is never copied here.

Point it at a directory holding an unmodified nanoGPT model.py (--builder-arg
nanogpt_dir=DIR, or the environment variable NANOGPT_DIR); validation/real-code/README.md names
the commit measured. The step is train.py's (lines 299-314 at commit 3adf61e): `logits, loss =
model(X, Y)`, `loss = loss / gradient_accumulation_steps` (1 here), `loss.backward()`,
optimizer step, `zero_grad(set_to_none=True)`; `logits` stays referenced by train.py's local
variable through backward and the optimizer step, so loss_fn hands it back to be held
(keep_logits=false drops it, as a loop that does not keep the output would).

lora_rank=R (with lora_targets, actsim's names: q,k,v = c_attn, o = attn.c_proj, up = c_fc,
down = mlp.c_proj; default c_attn, PEFT's gpt2 default) wraps those linears in PEFT-style LoRA
adapters (harness/realcode/lora_peft.py), freezes every other parameter and hooks the token
embedding's output to require grad (enable_input_require_grads).
"""
import importlib.util
import os

import torch


def build(nanogpt_dir=None, n_layer=4, n_head=4, n_embd=256, bias=True, batch=4, seq=256,
          block_size=None, vocab_size=50304, keep_logits=True, seed=0, lora_rank=0,
          lora_targets="q,k,v"):
    where = nanogpt_dir or os.environ.get("NANOGPT_DIR")
    if not where:
        raise ValueError("no nanoGPT directory: --builder-arg nanogpt_dir=DIR or NANOGPT_DIR")
    path = os.path.join(where, "model.py")
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    if spec is None or not os.path.isfile(path):
        raise FileNotFoundError("%s: no such file" % path)
    model_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model_py)
    torch.manual_seed(seed)
    cfg = model_py.GPTConfig(block_size=block_size or seq, vocab_size=vocab_size,
                             n_layer=n_layer, n_head=n_head, n_embd=n_embd, dropout=0.0,
                             bias=bool(bias))
    model = model_py.GPT(cfg)
    if lora_rank:
        import sys
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from lora_peft import apply_lora
        names = {"q": "attn.c_attn", "k": "attn.c_attn", "v": "attn.c_attn",
                 "o": "attn.c_proj", "up": "mlp.c_fc", "down": "mlp.c_proj"}
        wanted = sorted({names[t] for t in str(lora_targets).split(",")})
        n = apply_lora(model, int(lora_rank), wanted, model.transformer.wte)
        print("LoRA rank %d on %d linears (%s)" % (int(lora_rank), n, ", ".join(wanted)))
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, vocab_size, (batch, seq), generator=g)
    y = torch.randint(0, vocab_size, (batch, seq), generator=g)
    flash = all(b.attn.flash for b in model.transformer.h)
    print("nanoGPT %s: attention %s" % (path, "SDPA (flash)" if flash else
                                        "slow path (fp32 `bias` mask buffer per block)"))

    def loss_fn(m, inputs):
        logits, loss = m(inputs[0], inputs[1])
        loss = loss / 1  # train.py:301, gradient_accumulation_steps = 1
        return (loss, logits) if keep_logits else loss
    # nanoGPT's configure_optimizers: decay for >= 2-D parameters, none for the rest (two
    # groups; fused AdamW only on CUDA, so foreach here as measure_torch's adamw).
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return {"model": model, "blocks": list(model.transformer.h), "loss_fn": loss_fn,
            "inputs": (x, y), "optimizer_params": groups}
