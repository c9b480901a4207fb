#!/usr/bin/env python3
"""Checks bench/gpu/hf_reference.py's model configurations against the C++ preset table.

  hf_config_check.py SOURCE_DIR PRESETS_JSON

For every preset of common/spec/model_presets.cc but `tiny`: `hf_reference.py --print-config`
(which imports neither torch nor transformers) must give the table's model type and every value the
table holds (vocabulary, hidden and intermediate sizes, layers, heads, key/value heads, head_dim,
maximum positions, tied embeddings, rope theta, llama3 rope scaling, RMSNorm epsilon), and the
parameter count of those values, counted as HF's modules hold them, must equal the count that
`vramlab presets --json` (PRESETS_JSON) prints. Prints one line per preset; exit status 1 on any
difference.
"""
import json
import os
import re
import subprocess
import sys


def cc_presets(source):
    """{name: fields} from the ModelPresets() table of common/spec/model_presets.cc."""
    text = open(os.path.join(source, "common/spec/model_presets.cc")).read()
    rope = re.search(r'Llama3Rope\(double factor\)\s*\{\s*return\s*\{+"llama3",\s*factor,\s*([\d.]+),\s*([\d.]+),'
                     r'\s*(\d+)\}+;\s*\}', text)
    low, high, original = float(rope.group(1)), float(rope.group(2)), int(rope.group(3))
    table = text[text.index("presets = {"):]
    table = " ".join(table[:table.index("};")].split())
    out = {}
    for m in re.finditer(r'\{"([^"]+)", "([^"]+)", ([^{}]*?), (\{\}|Llama3Rope\(([\d.]+)\))\}', table):
        values = [v.strip() for v in m.group(3).split(",")]
        vocab, hidden, inter, layers, heads, kv, max_pos = (int(v) for v in values[:7])
        fields = dict(model_type=m.group(2), vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                      max_position_embeddings=max_pos, tie_word_embeddings=values[7] == "true",
                      head_dim=int(values[8]) or hidden // heads, rope_theta=float(values[9]),
                      rms_norm_eps=float(values[10]), rope=None)
        if m.group(5):
            fields["rope"] = dict(rope_type="llama3", factor=float(m.group(5)), low_freq_factor=low,
                                  high_freq_factor=high, original_max_position_embeddings=original)
        out[m.group(1)] = fields
    return out


def hf_config(source, preset):
    script = os.path.join(source, "bench/gpu/hf_reference.py")
    out = subprocess.run([sys.executable, script, "--print-config", "--preset", preset], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def hf_parameter_count(c):
    """HF's num_parameters() for the family of config kwargs `c` (model_type included)."""
    h, heads, kv, inter, vocab = (c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
                                  c["intermediate_size"], c["vocab_size"])
    d = c.get("head_dim") or h // heads
    attention = h * heads * d + 2 * h * kv * d + heads * d * h
    if c["model_type"] == "qwen2":
        attention += heads * d + 2 * kv * d  # q, k, v biases
    if c.get("attention_bias"):
        attention += heads * d + 2 * kv * d + h
    mlp = 3 * h * inter + (2 * inter + h if c.get("mlp_bias") else 0)
    norms = 2 * h + (2 * d if c["model_type"] == "qwen3" else 0)
    layer = attention + mlp + norms
    untied = 0 if c["tie_word_embeddings"] else vocab * h
    return vocab * h + c["num_hidden_layers"] * layer + h + untied


def differences(name, cc, hf):
    """What the HF configuration says differently from the C++ row."""
    problems = []
    rope = hf.get("rope_parameters") or {"rope_type": "default", "rope_theta": hf.get("rope_theta")}
    got = dict(model_type=hf["model_type"], vocab_size=hf["vocab_size"], hidden_size=hf["hidden_size"],
               intermediate_size=hf["intermediate_size"], num_hidden_layers=hf["num_hidden_layers"],
               num_attention_heads=hf["num_attention_heads"], num_key_value_heads=hf["num_key_value_heads"],
               max_position_embeddings=hf["max_position_embeddings"],
               tie_word_embeddings=hf["tie_word_embeddings"],
               head_dim=hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"],
               rope_theta=rope["rope_theta"], rms_norm_eps=hf["rms_norm_eps"],
               rope=None if rope["rope_type"] == "default" else {k: v for k, v in rope.items() if k != "rope_theta"})
    for key, want in cc.items():
        # The Qwen2.5 rows' HF side has always built max(32768, seq) positions; HF's rotary
        # embedding keeps only its inverse frequencies, so the count changes no number it computes.
        if key == "max_position_embeddings" and cc["model_type"] == "qwen2":
            continue
        if got[key] != want:
            problems.append(f"{name}: {key}: C++ table {want!r}, hf_reference.py {got[key]!r}")
    if hf.get("attention_bias") or hf.get("mlp_bias"):
        problems.append(f"{name}: biases beyond the family's own (the presets have none)")
    if hf.get("sliding_window") is not None or hf.get("use_sliding_window"):
        problems.append(f"{name}: a sliding window (the presets have none)")
    if hf["model_type"] == "mistral" and "sliding_window" not in hf:
        problems.append(f"{name}: sliding_window not given (MistralConfig's default is 4096)")
    if hf.get("use_cache") is not False:
        problems.append(f"{name}: use_cache is not false")
    return problems


def main():
    source, presets_json = sys.argv[1], sys.argv[2]
    counts = {p["name"]: int(p["parameterCount"]) for p in json.load(open(presets_json))["presets"]}
    table = cc_presets(source)
    if set(table) != set(counts):
        print(f"FAIL: the parsed C++ table {sorted(table)} is not the CLI's list {sorted(counts)}")
        return 1
    problems = []
    for name, cc in table.items():
        if name == "tiny":
            continue
        hf = hf_config(source, name)
        found = differences(name, cc, hf)
        count = hf_parameter_count(hf)
        if count != counts[name]:
            found.append(f"{name}: {count:,} parameters from hf_reference.py's values, {counts[name]:,} in the CLI")
        problems += found
        print(f"{'FAIL' if found else 'ok  '} {name} ({hf['model_type']}, {count:,} parameters)")
    for p in problems:
        print(f"FAIL: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
