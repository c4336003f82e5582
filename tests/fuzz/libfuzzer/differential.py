#!/usr/bin/env python3
"""Differential test of saccade's safetensors reader against Python's `safetensors` package (PyPI; not in CI).

Reads every file of the safetensors-based corpora (committed seeds and regression inputs, whatever
scripts/fuzz gathered in build/fuzz/corpus/, and the hand-made probes of write_probes) with both readers: saccade's through fuzz_safetensors_check
(built in build/release), Python's with safetensors.torch.load (BF16 needs torch). Lists every file one
accepts and the other rejects, grouped by the reason, and classifies each against the justified
disagreements of README.md ("Differential test"); an unexplained one makes the exit status 1.

Usage: /work/.venv-bench/bin/python tests/fuzz/libfuzzer/differential.py [folder ...]
"""
import collections
import json
import os
import pathlib
import struct
import subprocess
import sys

from safetensors.torch import load

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent
CHECK = ROOT / "build/release/tests/fuzz/libfuzzer/fuzz_safetensors_check"
TARGETS = ["safetensors", "state_dict", "checkpoint", "gpt"]


def explain(ours, theirs, path):
    """The README's name of a justified disagreement, or None."""
    if ours.startswith("OK"):  # saccade accepts, safetensors rejects
        if "HeaderTooSmall" in theirs or "header_size" in theirs.lower() and "small" in theirs.lower():
            return "A1 empty or short header"
        if "InvalidHeaderStart" in theirs:
            return "A2 header not starting with '{'"
        if "InvalidHeaderDeserialization" in theirs or "InvalidHeader" in theirs:
            return "A3 JSON that serde rejects and nlohmann accepts"
        if "MetadataIncompleteBuffer" in theirs or "InvalidOffset" in theirs:
            return "A4 offsets"
        return None
    # saccade rejects, safetensors accepts
    if "duplicate key" in ours:
        return "R1 duplicate keys"
    if "unsupported dtype" in ours:
        return "R2 dtypes saccade does not read"
    if "hole in the data buffer" in ours or "the tensors cover" in ours:
        return "R3 holes or trailing bytes in the data buffer"
    if "holds a byte other than 0 or 1" in ours:
        return "R4 bool bytes other than 0 and 1"
    if "invalid shape" in ours and "dimensions" not in ours:
        return "R5 more than 8 dimensions"
    if "__metadata__" in ours:
        return "R6 metadata that is not string to string"
    if "overlaps" in ours:
        return "R7 overlapping tensors"
    if "size too large" in ours or "too large" in ours:
        return "R8 sizes past 2^62"
    return None


def st(header, data=b"", raw=None):
    """A safetensors file: the JSON header (or `raw` header bytes) padded to 8, then `data`."""
    h = raw if raw is not None else json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def write_probes(folder):
    """Hand-made files at the edges where the two readers are known to differ (or might)."""
    folder.mkdir(parents=True, exist_ok=True)
    t = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    probes = {
        "duplicate_key": st(None, b"\0" * 4, raw=b'{"a":' + json.dumps(t).encode() + b',"a":' +
                            json.dumps(t).encode() + b"}"),
        "i32_dtype": st({"a": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
        "u8_dtype": st({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\0"),
        "hole": st({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
        "trailing_bytes": st({"a": t}, b"\0" * 8),
        "overlap": st({"a": t, "b": t}, b"\0" * 4),
        "bool_byte_2": st({"a": {"dtype": "BOOL", "shape": [1], "data_offsets": [0, 1]}}, b"\2"),
        "nine_dims": st({"a": {"dtype": "F32", "shape": [1] * 9, "data_offsets": [0, 4]}}, b"\0" * 4),
        "metadata_number": st({"__metadata__": {"k": 1}}),
        "metadata_not_object": st({"__metadata__": "x"}),
        "shape_float": st({"a": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}}, b"\0" * 4),
        "shape_negative": st({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4),
        "extra_field": st({"a": dict(t, extra=1)}, b"\0" * 4),
        "empty_header": struct.pack("<Q", 0),
        "header_only_spaces": struct.pack("<Q", 8) + b"        ",
        "leading_space": st(None, raw=b" {}"),
        "header_array": st(None, raw=b"[]"),
        "header_past_100MB": struct.pack("<Q", 100_000_001) + b"{}",
        "header_past_file": struct.pack("<Q", 64) + b"{}      ",
        "no_tensors": st({}),
        "zero_size_offsets_equal": st({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}),
        "nan_f16": st({"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}, b"\x01\x7e"),
        "utf8_name": st({"\u00e9\u4e2d": t}, b"\0" * 4),
        "control_char_metadata": st({"__metadata__": {"k": "a\u0000b"}}),
    }
    for name, data in probes.items():
        (folder / (name + ".safetensors")).write_bytes(data)
    return folder


def main():
    folders = [pathlib.Path(a) for a in sys.argv[1:]]
    if not folders:
        folders.append(write_probes(ROOT / "build/fuzz/differential_probes"))
        for t in TARGETS:
            folders += [HERE / "corpus" / t, HERE / "regressions" / t, ROOT / "build/fuzz/corpus" / t]
    files = sorted({p for f in folders if f.is_dir() for p in f.iterdir() if p.is_file()})
    if not files:
        sys.exit("differential.py: no files")
    ours = {}
    for i in range(0, len(files), 500):
        out = subprocess.run([str(CHECK)] + [str(f) for f in files[i:i + 500]], capture_output=True,
                             text=True, errors="replace", check=True).stdout
        for line in out.splitlines():
            path, status, rest = line.split("\t", 2)
            ours[pathlib.Path(path)] = status + " " + rest
    groups = collections.defaultdict(list)
    agree = 0
    for f in files:
        try:
            load(f.read_bytes())
            theirs = "OK"
        except Exception as e:  # noqa: BLE001 - any rejection counts
            theirs = f"ERR {type(e).__name__}: {e}".replace("\n", " ")
        mine = ours[f]
        if mine.startswith("OK") == (theirs == "OK"):
            agree += 1
            continue
        reason = explain(mine, theirs, f) or "UNEXPLAINED"
        groups[reason].append((f, mine, theirs))
    print(f"{len(files)} files: {agree} agree, {len(files) - agree} disagree")
    for reason in sorted(groups):
        items = groups[reason]
        print(f"\n== {reason}: {len(items)} files")
        for f, mine, theirs in items:
            print(f"  {os.path.relpath(f, ROOT)}\n    saccade:     {mine[:160]}\n    safetensors: {theirs[:160]}")
    sys.exit(1 if "UNEXPLAINED" in groups else 0)


if __name__ == "__main__":
    main()
