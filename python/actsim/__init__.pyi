from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

_Scalar = Union[int, float, str, bool]
_Value = Union[_Scalar, Sequence[_Scalar], range, None]
Row = Dict[str, Union[int, float, str, bool, None]]

class ConfigError(ValueError):
    """Bad input: the CLI's one-line message ("--seq: 1k:x: ...")."""

def columns() -> List[str]: ...
def run(
    *,
    model: _Value = ...,
    device: _Value = ...,
    strategy: _Value = ...,
    profile: _Value = ...,
    precision: _Value = ...,
    attention: _Value = ...,
    dropout: _Value = ...,
    batch: _Value = ...,
    seq: _Value = ...,
    tp: _Value = ...,
    sp: _Value = ...,
    dp: _Value = ...,
    zero: _Value = ...,
    optimizer: _Value = ...,
    impl: _Value = ...,
    target_seq: _Value = ...,
    set_to_none: _Value = ...,
    reentrant: _Value = ...,
    lora_rank: _Value = ...,
    lora_targets: _Value = ...,
    qlora: _Value = ...,
    padding: _Value = ...,
    norm_kernel: _Value = ...,  # time5 (issue 11)
    compile: _Value = ...,  # fp8sac (issue 10)
    grad_accum_fusion: _Value = ...,  # time6 (issue 11)
    cp: _Value = ...,
    fp8: _Value = ...,
    ep: _Value = ...,
    moe_imbalance: _Value = ...,
    moe_capacity: _Value = ...,
    moe_aux_loss_coeff: _Value = ...,  # mla5 (issue 13)
    etp: _Value = ...,  # etp (issue 13)
    cross_entropy_loss_fusion: _Value = ...,  # te_norm (issue 10)
    deterministic: _Value = ...,  # time7 (issue 11)
    moe_shared_expert_overlap: _Value = ...,  # moetp (issue 13)
    gpus_per_node: _Value = ...,
    allocator: _Value = ...,
    prefetch: _Value = ...,
    pp: _Value = ...,
    vpp: _Value = ...,
    num_microbatches: _Value = ...,
    **flags: _Value,
) -> List[Row]: ...
def sweep(
    *,
    jobs: Optional[int] = ...,
    shard: Optional[str] = ...,
    model: _Value = ...,
    device: _Value = ...,
    strategy: _Value = ...,
    profile: _Value = ...,
    precision: _Value = ...,
    attention: _Value = ...,
    dropout: _Value = ...,
    batch: _Value = ...,
    seq: _Value = ...,
    tp: _Value = ...,
    sp: _Value = ...,
    dp: _Value = ...,
    zero: _Value = ...,
    optimizer: _Value = ...,
    impl: _Value = ...,
    target_seq: _Value = ...,
    set_to_none: _Value = ...,
    reentrant: _Value = ...,
    lora_rank: _Value = ...,
    lora_targets: _Value = ...,
    qlora: _Value = ...,
    padding: _Value = ...,
    norm_kernel: _Value = ...,  # time5 (issue 11)
    compile: _Value = ...,  # fp8sac (issue 10)
    grad_accum_fusion: _Value = ...,  # time6 (issue 11)
    cp: _Value = ...,
    fp8: _Value = ...,
    ep: _Value = ...,
    moe_imbalance: _Value = ...,
    moe_capacity: _Value = ...,
    moe_aux_loss_coeff: _Value = ...,  # mla5 (issue 13)
    etp: _Value = ...,  # etp (issue 13)
    cross_entropy_loss_fusion: _Value = ...,  # te_norm (issue 10)
    deterministic: _Value = ...,  # time7 (issue 11)
    moe_shared_expert_overlap: _Value = ...,  # moetp (issue 13)
    gpus_per_node: _Value = ...,
    allocator: _Value = ...,
    prefetch: _Value = ...,
    pp: _Value = ...,
    vpp: _Value = ...,
    num_microbatches: _Value = ...,
    **flags: _Value,
) -> Iterator[Row]: ...
def plan(
    budget: Union[int, str],
    *,
    model: _Value = ...,
    device: _Value = ...,
    profile: _Value = ...,
    precision: _Value = ...,
    attention: _Value = ...,
    dropout: _Value = ...,
    batch: _Value = ...,
    seq: _Value = ...,
    tp: _Value = ...,
    sp: _Value = ...,
    dp: _Value = ...,
    zero: _Value = ...,
    optimizer: _Value = ...,
    impl: _Value = ...,
    target_seq: _Value = ...,
    set_to_none: _Value = ...,
    reentrant: _Value = ...,
    lora_rank: _Value = ...,
    lora_targets: _Value = ...,
    qlora: _Value = ...,
    padding: _Value = ...,
    norm_kernel: _Value = ...,  # time5 (issue 11)
    compile: _Value = ...,  # fp8sac (issue 10)
    grad_accum_fusion: _Value = ...,  # time6 (issue 11)
    cp: _Value = ...,
    fp8: _Value = ...,
    ep: _Value = ...,
    moe_imbalance: _Value = ...,
    moe_capacity: _Value = ...,
    moe_aux_loss_coeff: _Value = ...,  # mla5 (issue 13)
    etp: _Value = ...,  # etp (issue 13)
    cross_entropy_loss_fusion: _Value = ...,  # te_norm (issue 10)
    deterministic: _Value = ...,  # time7 (issue 11)
    moe_shared_expert_overlap: _Value = ...,  # moetp (issue 13)
    gpus_per_node: _Value = ...,
    allocator: _Value = ...,
    prefetch: _Value = ...,
    **flags: _Value,
) -> Row: ...
def valley(
    *,
    model: _Value = ...,
    device: _Value = ...,
    profile: _Value = ...,
    precision: _Value = ...,
    attention: _Value = ...,
    dropout: _Value = ...,
    batch: _Value = ...,
    seq: _Value = ...,
    tp: _Value = ...,
    sp: _Value = ...,
    dp: _Value = ...,
    zero: _Value = ...,
    optimizer: _Value = ...,
    impl: _Value = ...,
    target_seq: _Value = ...,
    set_to_none: _Value = ...,
    reentrant: _Value = ...,
    lora_rank: _Value = ...,
    lora_targets: _Value = ...,
    qlora: _Value = ...,
    padding: _Value = ...,
    norm_kernel: _Value = ...,  # time5 (issue 11)
    compile: _Value = ...,  # fp8sac (issue 10)
    grad_accum_fusion: _Value = ...,  # time6 (issue 11)
    cp: _Value = ...,
    fp8: _Value = ...,
    ep: _Value = ...,
    moe_imbalance: _Value = ...,
    moe_capacity: _Value = ...,
    moe_aux_loss_coeff: _Value = ...,  # mla5 (issue 13)
    etp: _Value = ...,  # etp (issue 13)
    cross_entropy_loss_fusion: _Value = ...,  # te_norm (issue 10)
    deterministic: _Value = ...,  # time7 (issue 11)
    moe_shared_expert_overlap: _Value = ...,  # moetp (issue 13)
    gpus_per_node: _Value = ...,
    allocator: _Value = ...,
    **flags: _Value,
) -> List[Dict[str, Union[int, float, str, bool]]]: ...
def explain_peak(top: int = ..., **flags: _Value) -> List[Dict[str, Union[int, str, None]]]: ...
def models() -> Dict[str, List[Any]]: ...
