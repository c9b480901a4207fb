#!/usr/bin/env python3
"""Prints the per-rank prediction tables of docs/PARALLEL.md ("Worked numbers"), asked of a running
daemon through the CLI, so that the tables can be produced again after an estimator change.

    vramlabd --listen=127.0.0.1:50791 --data-dir=$(mktemp -d) --device=cpu --worker-path=/bin/true &
    bench/estimator/parallel_tables.py --cli build/bin/vramlab --addr 127.0.0.1:50791 > tables.md

Three sections: qwen2.5-1.5b full fine-tuning (rows at 24 GiB and the smallest world size at 24, 12,
8 and 6 GiB), qwen2.5-7b's smallest world size at 80, 40, 24 and 16 GiB, and qwen2.5-7b with LoRA
rank 16 (rows at 24 GiB, smallest world size at 24, 16, 12 and 8 GiB). Every run: bf16, AdamW, 3
steps, micro-batch 1, seq 2048, sdpa, every layer checkpointed, chunked loss, CUDA.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

GIB = float(1 << 30)
TRAINING = ('micro_batch_size: 1 seq_len: 2048 steps: 3 attention: SDPA checkpoint_every_k_layers: 1 '
            'loss: CHUNKED')
# (label, CLI flags) per sharding row; N is appended to the label.
SHARDINGS = [
    ('none', ['--sharding', 'none']),
    ('optimizer', ['--sharding', 'optimizer']),
    ('gradients', ['--sharding', 'gradients']),
    ('full', ['--sharding', 'full']),
    ('full + reshard', ['--sharding', 'full', '--reshard-after-forward']),
    ('full + reshard, no prefetch', ['--sharding', 'full', '--reshard-after-forward', '--prefetch=false']),
]
COLUMNS = ['weights', 'gradients', 'optimizer', 'activations', 'gathered', 'communication']


def spec_file(directory, preset, lora):
    path = os.path.join(directory, f'{preset}{"-lora" if lora else ""}.txtpb')
    adapter = ' adapter { kind: LORA rank: 16 }' if lora else ''
    with open(path, 'w') as out:
        out.write(f'model {{ preset: "{preset}" }}\ntraining {{ {TRAINING}{adapter} }}\ndevice: CUDA\n')
    return path


def estimate(args, spec, limit, flags):
    command = [args.cli, 'estimate', f'--addr={args.addr}', '--spec', spec, '--limit', limit, '--json'] + flags
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f'{" ".join(command)} failed: {result.stderr}')
    return json.loads(result.stdout)


def gib(value):
    return f'{int(value) / GIB:.2f}'


def row(label, anatomy, buffers, peak, phase, verdict):
    cells = [gib(anatomy.get('weightsBytes', 0)), gib(anatomy.get('gradientsBytes', 0)),
             gib(anatomy.get('optimizerStateBytes', 0)), gib(anatomy.get('activationsBytes', 0)),
             gib(buffers[0]), gib(buffers[1]), gib(peak), phase, verdict]
    return f'| {label} | ' + ' | '.join(cells) + ' |'


def rank_table(args, spec, limit):
    print('| run | ' + ' | '.join(COLUMNS) + ' | peak alloc | peak phase | verdict |')
    print('|---|' + '---|' * (len(COLUMNS) + 3))
    one = estimate(args, spec, limit, [])
    print(row('one process', one['anatomy'], (0, 0), one['predictedPeakBytes'], one['peakPhase'], one['verdict']))
    for label, flags in SHARDINGS:
        for n in (2, 4, 8):
            e = estimate(args, spec, limit, ['--world-size', str(n)] + flags)
            p = e['parallel']
            print(row(f'{label}, N={n}', p['anatomy'],
                      (p.get('gatheredParametersBytes', 0), p.get('communicationBufferBytes', 0)),
                      p['predictedPeakBytes'], p['peakPhase'], p['verdict']))


def search_table(args, spec, limits):
    print('| sharding, limit | ' + ' | '.join(limits) + ' |')
    print('|---|' + '---|' * len(limits))
    for label, flags in SHARDINGS:
        if label == 'full + reshard, no prefetch' and spec.endswith('qwen2.5-7b.txtpb'):
            continue  # docs/PARALLEL.md's 7b search has no such row
        cells = []
        for limit in limits:
            e = estimate(args, spec, limit, ['--world-size', '2', '--smallest-world-size'] + flags)
            n = e['parallel'].get('smallestWorldSizeThatFits', 0)
            cells.append(str(n) if n else 'none up to 64')
        print(f'| {label} | ' + ' | '.join(cells) + ' |')


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--cli', required=True, help='the vramlab CLI')
    parser.add_argument('--addr', required=True, help="a running daemon's address")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        q15 = spec_file(directory, 'qwen2.5-1.5b', False)
        q7 = spec_file(directory, 'qwen2.5-7b', False)
        q7_lora = spec_file(directory, 'qwen2.5-7b', True)
        print('## qwen2.5-1.5b, limit 24GiB\n')
        rank_table(args, q15, '24GiB')
        print()
        search_table(args, q15, ['24GiB', '12GiB', '8GiB', '6GiB'])
        print('\n## qwen2.5-7b\n')
        search_table(args, q7, ['80GiB', '40GiB', '24GiB', '16GiB'])
        print('\n## qwen2.5-7b, LoRA rank 16, limit 24GiB\n')
        rank_table(args, q7_lora, '24GiB')
        print()
        search_table(args, q7_lora, ['24GiB', '16GiB', '12GiB', '8GiB'])


if __name__ == '__main__':
    main()
