#!/usr/bin/env python3
"""Measures the GPU's dense bf16 matrix rate (the MFU denominator) and prints the machine's facts."""
import json
import subprocess
import time

import torch


def main():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    rates = []
    for _ in range(10):
        start = time.perf_counter()
        a @ b
        torch.cuda.synchronize()
        rates.append(2 * n**3 / (time.perf_counter() - start))
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    import transformers
    print(json.dumps(dict(gpu=torch.cuda.get_device_name(0), nvidia_smi=smi, torch=torch.__version__,
                          cuda=torch.version.cuda, transformers=transformers.__version__,
                          bf16_matmul_tflops_median=sorted(rates)[len(rates) // 2] / 1e12,
                          date=time.strftime("%Y-%m-%d"))))


if __name__ == "__main__":
    main()
