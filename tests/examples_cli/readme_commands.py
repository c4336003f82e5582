#!/usr/bin/env python3
"""Every command line a README shows for an example program parses, and runs with tiny settings.

usage: readme_commands.py {--parse|--run} BUILD_DIR README...

Finds each `build/release/examples/<dir>/<program> ...` in the READMEs (a line of a code block or inline code,
joined across trailing backslashes, up to a pipe, `;`, `&&`, `#` or a closing backtick), with what comes
before it on the line: `NAME=value` settings go into its environment, `echo "words" |` becomes its standard
input, and `mpirun` marks it as a distributed run.

--parse: runs the program of BUILD_DIR with each command's arguments under SACCADE_EXAMPLES_PARSE_ONLY=1
(examples/common/cli.h: parse, say so, and exit 0, without running): flags that exist, values in range. And a
README's `cmake -S . -B DIR` builds into build/release, the folder its commands run from.

--run: runs each command for real, the commands of one README in order in a fresh temporary folder (so that a
README's `--resume` or `--checkpoint out/x/best.safetensors` finds what its training command wrote there),
with tiny settings: the sizes, steps and evaluation sets of TINY below take the place of the README's values
or are added, keeping the README's order between runs (a resume with more --steps than its first run still
has more). Each must exit 0. A command that cannot run here is skipped, with its reason in the output: a
distributed run (mpirun), or a program whose data is not installed.

Fails, listing them, when any command does not parse or does not exit 0.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

COMMAND = re.compile(r"build/release/examples/(\w+)/(\w+)((?:[^|;&#`\n]|&(?!&))*)")
ECHO = re.compile(r"echo\s+(\"[^\"]*\"|'[^']*'|\S+)\s*\|\s*$")
SETTING = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
BUILD = re.compile(r"cmake -S \S+ -B (\S+)")

# The data each program reads (the tests that train: scripts/setup installs them).
DATA = {
    "gpt": ("/usr/share/games/fortunes/fortunes", "Debian's fortunes"),
    "g2p": ("/usr/share/festival/dicts/cmu/cmudict-0.4.out", "festlex-cmu"),
    "image_caption": ("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", "dataset-fashion-mnist"),
}


def steps(first, more):
    """--steps: `first` for a README's run of the default length or shorter, `more` for a longer one."""
    return lambda given, default: str(more if given is not None and int(given) > default else first)


# A model folder in the Hugging Face layout that a README downloads (`gpt2`, a Llama's): the tiny folders of the
# same layout that tests/fixtures/make_hf_*.py wrote stand in for it.
FIXTURES = __import__("pathlib").Path(__file__).resolve().parent.parent / "data"


def hf_folder(given):
    if given is None:
        return None
    return str(FIXTURES / ("hf_llama" if re.search(r"llama|smol", given, re.I) else "hf_gpt2"))


# the sizes of a model that --init-from-hf brings (gpt train refuses them beside it)
HF_SIZES = {"--context", "--n-layer", "--n-head", "--d-model", "--vocab-size", "--tokenizer", "--dropout"}


# Per program (and gpt's subcommand): flag -> tiny value (a string: taken whatever the README says) or a
# function (README's value or None, the program's default) -> tiny value; and the program's default --steps.
TINY = {
    "gpt train": ({
        "--steps": steps(4, 6), "--stop-at": lambda given, _: "2" if given else None,
        "--batch-size": "2", "--context": "16", "--n-layer": "1", "--n-head": "2", "--d-model": "16",
        "--eval-every": "0", "--eval-tokens": "256", "--sample-tokens": "8", "--threads": "1",
        "--vocab-size": "400",  # the least for the fortunes: 366 (a byte tokenizer takes and ignores it)
        "--warmup": "1", "--time-limit": lambda given, _: "0.5" if given else None,
        "--init-from-hf": lambda given, _: hf_folder(given),
    }, 1500),
    "gpt sample": ({"--max-new-tokens": "4", "--threads": "1", "--hf": lambda given, _: hf_folder(given)}, 0),
    "gpt eval": ({"--hf": lambda given, _: hf_folder(given), "--data": str(FIXTURES / "hf_eval.txt"),
                  "--threads": "1"}, 0),
    "gpt finetune": ({
        "--hf": lambda given, _: hf_folder(given), "--data": str(FIXTURES / "hf_instruct.jsonl"),
        "--val": lambda given, _: str(FIXTURES / "hf_instruct.jsonl") if given else None,
        "--steps": "2", "--batch-size": "2", "--lora-r": "4", "--eval-every": "0", "--threads": "1",
    }, 100),
    "gpt export": ({"--from-hf": lambda given, _: hf_folder(given)}, 0),
    "g2p": ({
        "--steps": steps(2, 3), "--train-words": "200", "--test-words": "5", "--val-words": "5",
        "--val-every": "1", "--hidden": "8", "--d-model": "8", "--layers": "1", "--threads": "1",
        "--beam": lambda given, _: given or "2", "--batch-size": "8",
    }, 2500),
    "image_caption": ({
        "--steps": steps(2, 3), "--batch-size": "2", "--eval-scenes": "2", "--pictures": "1", "--conv1": "4",
        "--conv2": "4", "--d-model": "16", "--hidden": "16", "--threads": "1",
    }, 1000),
    "nw_regression": ({"--epochs": lambda given, _: given or "5"}, 0),
}
# commands that only print or read: no training flags added
NO_TINY = {"--help", "-h"}
# flags of a trained model's use (not of training): of TINY, only the evaluation's sizes go to these commands
USE_ONLY = {"g2p": {"--words", "--eval-only"}, "image_caption": {"--eval-only"}}
FOR_USE = {"--threads", "--beam", "--test-words", "--eval-scenes", "--pictures"}
# ... and of those, the evaluation's only with --eval-only (g2p refuses --test-words when it pronounces words)
FOR_EVAL = {"--test-words", "--eval-scenes", "--pictures"}


def commands(path):
    """(program folder, program, arguments, line number, what comes before the program on the line)."""
    text = open(path, encoding="utf-8").read().replace("\\\n", " ")
    for number, line in enumerate(text.splitlines(), 1):
        for m in COMMAND.finditer(line):
            try:
                args = shlex.split(m.group(3))
            except ValueError:  # an unbalanced quote: the command goes on past what the regex took
                args = shlex.split(m.group(3) + '"')
            before = line[: m.start()]
            before = before[before.rfind("`") + 1:]  # inline code: from its opening backtick
            yield m.group(1), m.group(2), args, number, before


def tiny_arguments(program, args):
    """`args` with the tiny settings of TINY in place of the README's values, or added."""
    if NO_TINY & set(args):
        return args
    key = f"gpt {args[0]}" if program == "gpt" and args else program
    if key not in TINY:
        return args
    table, default_steps = TINY[key]
    uses_checkpoint = program in USE_ONLY and (USE_ONLY[program] & set(args) or
                                               ("--checkpoint" in args and "--resume" not in args))
    out, given = [], {}
    i = 0
    while i < len(args):  # the README's flags, with their values where TINY has the flag
        a = args[i]
        if a in table and i + 1 < len(args) and not args[i + 1].startswith("--"):
            given[a] = args[i + 1]
            i += 2
            continue
        out.append(a)
        i += 1
    for flag, rule in table.items():
        if uses_checkpoint and flag not in given and flag not in FOR_USE:
            continue  # a trained model's sizes come from its checkpoint
        if uses_checkpoint and flag not in given and flag in FOR_EVAL and "--eval-only" not in args:
            continue
        if "--init-from-hf" in given and flag in HF_SIZES:
            continue  # the pretrained folder's sizes
        value = rule(given.get(flag), default_steps) if callable(rule) else rule
        if value is not None:
            out += [flag, value]
    return out


def skip_reason(program, before):
    if re.search(r"\bmpirun\b", before):
        return "a distributed run: needs mpirun and several ranks (tests/distributed runs that path)"
    if program in DATA and not os.path.exists(DATA[program][0]):
        return f"{DATA[program][0]} is not installed ({DATA[program][1]}, scripts/setup)"
    return None


def environment(before, base):
    env = dict(base)
    for word in before.split():
        if SETTING.match(word):
            name, value = word.split("=", 1)
            env[name] = value
    return env


def main():
    mode, build, readmes = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3:]
    if mode not in ("--parse", "--run"):
        sys.exit(__doc__)
    base = dict(os.environ)
    # as a user runs them: the programs pick their OpenBLAS core themselves (a core set here makes them warn)
    base.pop("OPENBLAS_CORETYPE", None)
    if mode == "--parse":
        base["SACCADE_EXAMPLES_PARSE_ONLY"] = "1"
    base.setdefault("OMP_NUM_THREADS", "1")
    failed, skipped, done = [], [], 0
    start = time.monotonic()
    for readme in readmes:
        if mode == "--parse":
            for number, line in enumerate(open(readme, encoding="utf-8"), 1):
                for m in BUILD.finditer(line):
                    if m.group(1) != "build/release":
                        failed.append(f"{os.path.relpath(readme)}:{number}: builds into {m.group(1)}, while "
                                      "the commands run build/release/examples/...")
        work = tempfile.mkdtemp(prefix="readme_commands_")
        try:
            for folder, program, args, number, before in commands(readme):
                binary = os.path.join(build, "examples", folder, program)
                where = f"{os.path.relpath(readme)}:{number}: {program} {shlex.join(args)}"
                if not os.path.exists(binary):
                    failed.append(f"{where}\n    no program {binary}")
                    continue
                stdin = None
                if mode == "--run":
                    reason = skip_reason(program, before)
                    if reason:
                        skipped.append(f"{where}\n    {reason}")
                        continue
                    args = tiny_arguments(program, args)
                    echo = ECHO.search(before)
                    stdin = shlex.split(echo.group(1))[0] + "\n" if echo else ""
                began = time.monotonic()
                try:
                    run = subprocess.run([binary] + args, env=environment(before, base), cwd=work, input=stdin,
                                         stdin=subprocess.DEVNULL if stdin is None else None,
                                         capture_output=True, text=True, errors="replace", timeout=120)
                except subprocess.TimeoutExpired:
                    failed.append(f"{where}\n    still running after 120 s")
                    continue
                done += 1
                took = time.monotonic() - began
                if mode == "--run":
                    print(f"rc {run.returncode} in {took:.2f} s: {program} {shlex.join(args)}")
                if run.returncode != 0:
                    tail = "\n    ".join((run.stdout + run.stderr).strip().splitlines()[-5:])
                    failed.append(f"{where}\n    exit code {run.returncode}: {tail}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    verb = "ran" if mode == "--run" else "parsed"
    print(f"{done} commands {verb} in {time.monotonic() - start:.1f} s, {len(skipped)} skipped")
    for s in skipped:
        print("SKIPPED:", s)
    for f in failed:
        print("FAIL:", f)
    sys.exit(1 if failed or done == 0 else 0)


if __name__ == "__main__":
    main()
