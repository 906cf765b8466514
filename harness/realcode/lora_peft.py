"""LoRA adapters as HF PEFT makes them, for harness/measure_torch.py builders (peft is not
importable on the Debian toolchain, so this module is written from its source; none of PEFT's code
is copied).

Read at huggingface/peft commit 5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40:
- src/peft/tuners/lora/layer.py `LoraLayer.update_layer`: lora_A = nn.Linear(in_features, r,
  bias=False), lora_B = nn.Linear(r, out_features, bias=False) (lora_bias False), dropout
  nn.Identity() when lora_dropout == 0 (LoraConfig's default), scaling = lora_alpha / r
  (LoraConfig: r 8, lora_alpha 8); B initialized to zeros (init_lora_weights=True).
- `Linear.forward`: result = self.base_layer(x); x = self._cast_input_dtype(x,
  lora_A.weight.dtype) (tuners_utils.py: x.to(dtype) only when the dtypes differ); result =
  result + lora_B(lora_A(dropout(x))) * scaling; result.to(torch_result_dtype).
- `BaseTuner._mark_only_adapters_as_trainable` (tuners_utils.py, lora/model.py, bias "none"):
  every parameter whose name has no "lora_" is frozen.
- utils/other.py `prepare_model_for_kbit_training` / transformers' `enable_input_require_grads`:
  a forward hook on the input embeddings makes their output require grad (PEFT and the Trainer
  install it whenever gradient checkpointing is on). `apply_lora(..., input_hook=True)` installs it.
"""
import torch
import torch.nn as nn


class LoraLinear(nn.Module):
    def __init__(self, base, r, alpha=None):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=5 ** 0.5)
        nn.init.zeros_(self.lora_B.weight)
        self.lora_dropout = nn.Identity()
        self.scaling = (alpha if alpha is not None else 8) / r
        for p in (self.lora_A.weight, self.lora_B.weight):
            p.data = p.data.to(base.weight.dtype)

    def forward(self, x):
        result = self.base_layer(x)
        torch_result_dtype = result.dtype
        if x.dtype != self.lora_A.weight.dtype:
            x = x.to(self.lora_A.weight.dtype)
        result = result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling
        return result.to(torch_result_dtype)


def apply_lora(model, r, module_names, input_embeddings=None, alpha=None):
    """Wraps every nn.Linear whose qualified name ends with one of `module_names`, freezes the
    rest; hooks `input_embeddings` (a module) so that its output requires grad."""
    targets = []
    for name, mod in model.named_modules():
        for child_name, child in mod.named_children():
            full = "%s.%s" % (name, child_name) if name else child_name
            if isinstance(child, nn.Linear) and any(full.endswith(t) for t in module_names):
                targets.append((mod, child_name, child))
    if not targets:
        raise ValueError("LoRA targets %r name no nn.Linear" % (module_names,))
    for mod, child_name, child in targets:
        setattr(mod, child_name, LoraLinear(child, r, alpha))
    for name, p in model.named_parameters():
        p.requires_grad = "lora_" in name
    if input_embeddings is not None:
        input_embeddings.register_forward_hook(lambda m, i, o: o.requires_grad_(True))
    return len(targets)
