#!/usr/bin/env python3
"""Occupancy of Transformer Engine's norm backward kernels, for sim/src/norm_te.cpp (tece, issue 10).

TE sizes its norm backward's weight-gradient workspace (dgamma_part, and dbeta_part for LayerNorm:
ctas_per_col x cols fp32 each) from ctas_per_col = SMs x ctas_per_sm / ctas_per_row, where
ctas_per_sm is cudaOccupancyMaxActiveBlocksPerMultiprocessor of the kernel it compiled
(transformer_engine/common/normalization/rtc_dispatch.cpp register_launcher and the *_general
closures @ d0067d0da6cb). ctas_per_sm depends on the kernel's registers, which only the compiler
knows: this script compiles every registered backward kernel (RMSNorm and LayerNorm, weights =
input = output in bf16 or fp32, compute fp32) through NVRTC with TE's own options
(transformer_engine/common/util/rtc.cpp: --std=c++17 --gpu-architecture=sm_XX), reads ptxas's
register and static shared-memory counts, and applies CUDA's occupancy rules (cuda_occupancy.h:
64 warps and 32 CTAs per SM; 65,536 registers in 4 sub-partitions, 256-register allocation unit
per warp; shared memory per CTA = static + dynamic + 1 KiB reserved, in 128 B units, out of
164 KiB on sm_80 and 228 KiB on sm_90). It prints the table norm_te.cpp holds.

Needs a checkout of NVIDIA/TransformerEngine (git; read at the commit given) and libnvrtc (CUDA
toolkit; no GPU). Usage: te_norm_occupancy.py TE_REPO [COMMIT]
"""
import ctypes, re, subprocess, sys

def main():
    repo, commit = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "HEAD")
    show = lambda p: subprocess.run(["git", "-C", repo, "show", f"{commit}:transformer_engine/common/{p}"],
                                    capture_output=True, text=True, check=True).stdout
    headers = {"kernel_params.h": show("normalization/kernel_params.h"),
               "kernel_traits.h": show("normalization/kernel_traits.h"),
               "utils.cuh": show("utils.cuh"),
               "rmsnorm_bwd_kernels.cuh": show("normalization/rmsnorm/rmsnorm_bwd_kernels.cuh"),
               "ln_bwd_kernels.cuh": show("normalization/layernorm/ln_bwd_kernels.cuh")}
    nvrtc = ctypes.CDLL("libnvrtc.so")
    def compile_(src, expr, arch):
        prog = ctypes.c_void_p()
        names = list(headers)
        hs = (ctypes.c_char_p * len(names))(*[headers[n].encode() for n in names])
        hn = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
        assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", len(names), hs, hn) == 0
        assert nvrtc.nvrtcAddNameExpression(prog, expr.encode()) == 0
        opts = [b"--std=c++17", f"--gpu-architecture=sm_{arch}".encode(),
                b"-I/usr/local/cuda/include", b"--ptxas-options=-v"]
        rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        n = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
        text = log.value.decode()
        if rc != 0: raise SystemExit(f"te_norm_occupancy: NVRTC failed for {expr}: {text[-300:]}")
        regs = int(re.findall(r"Used (\d+) registers", text)[-1])
        smem = re.findall(r"(\d+) bytes smem", text)
        return regs, int(smem[-1]) if smem else 0

    def occupancy(arch, threads, regs, smem):
        warps = threads // 32
        by_warps = min(64 // warps, 32)
        per_warp = -(-regs * 32 // 256) * 256
        by_regs = (16384 // per_warp) * 4 // warps
        per_cta = -(-(smem + 1024) // 128) * 128
        by_smem = (167936 if arch == 80 else 233472) // per_cta
        return min(by_warps, by_regs, by_smem)

    N = "::transformer_engine::normalization::"
    files = {"RMSNorm": ("normalization/rmsnorm/rmsnorm_bwd_semi_cuda_kernel.cu", "rmsnorm_bwd_kernels.cuh", "rmsnorm"),
             "LayerNorm": ("normalization/layernorm/ln_bwd_semi_cuda_kernel.cu", "ln_bwd_kernels.cuh", "ln")}
    print("// norm, tuned, hidden, fp32, ctas_per_row, warps_m, ctas_per_sm sm_80, sm_90 (regs 80/90)")
    for norm, (path, hdr, pre) in files.items():
        src = f'#include "kernel_traits.h"\n#include "{hdr}"\n'
        pat = r"REGISTER_NORM_LAUNCHER\(\s*%s,\s*Backward,\s*(tuned|general),\s*([^)]*)\)" % norm
        for m in re.finditer(pat, show(path)):
            kind, a = m.group(1), [x.strip() for x in m.group(2).split(",")]
            hidden, wt, it, ot, ct = int(a[0]), a[1], a[2], a[3], a[4]
            if not (wt == it == ot and wt in ("bf16", "fp32") and ct == "fp32"): continue
            cr, wm, wn, bl = (map(int, a[5:9]) if kind == "tuned" else (1, *map(int, a[5:8])))
            traits = f"{N}Kernel_traits<{N}{wt}, {N}{it}, {N}{ot}, {N}{ct}, uint32_t, {hidden}, {cr}, {wm}, {wn}, {bl}>"
            expr = f"&{N}{pre}_bwd_{kind}_kernel<{traits}" + (", false>" if norm == "RMSNorm" else ">")
            threads = wm * wn * 32
            # dynamic shared memory (rtc_dispatch.cpp bwd_smem_bytes): tuned kernels only
            dyn = 0
            if kind == "tuned":
                dyn = (0 if wn == 1 else wm * wn * 8 * 2) + (0 if cr > 1 else wm * hidden * 4)
            occ, regs = [], []
            for arch in (80, 90):
                r, s = compile_(src, expr, arch)
                regs.append(r)
                occ.append(occupancy(arch, threads, r, s + dyn))
            print(f"    {{k{norm}, {str(kind == 'tuned').lower()}, {hidden}, {str(wt == 'fp32').lower()}, "
                  f"{cr}, {wm}, {occ[0]}, {occ[1]}}},  // regs {regs[0]}/{regs[1]}")

if __name__ == "__main__":
    main()
