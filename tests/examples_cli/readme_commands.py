#!/usr/bin/env python3
"""Every command line a README shows for an example program parses (flags that exist, values in range).

usage: readme_commands.py BUILD_DIR README...

Finds each `build/release/examples/<dir>/<program> ...` in the READMEs (a line of a code block or inline code,
joined across trailing backslashes, up to a pipe, `;`, `&&`, `#` or a closing backtick), runs the program of
BUILD_DIR with those arguments under SACCADE_EXAMPLES_PARSE_ONLY=1 (examples/common/cli.h: parse, say so, and
exit 0, without running) and fails, listing them, when any command does not parse.
"""
import os
import re
import shlex
import subprocess
import sys

COMMAND = re.compile(r"build/release/examples/(\w+)/(\w+)((?:[^|;&#`\n]|&(?!&))*)")


def commands(path):
    """The (program, arguments, line number) of each command in the README at `path`."""
    text = open(path, encoding="utf-8").read().replace("\\\n", " ")
    for number, line in enumerate(text.splitlines(), 1):
        for m in COMMAND.finditer(line):
            try:
                args = shlex.split(m.group(3))
            except ValueError:  # an unbalanced quote: the command goes on past what the regex took
                args = shlex.split(m.group(3) + '"')
            yield m.group(1), m.group(2), args, number


def main():
    build, readmes = sys.argv[1], sys.argv[2:]
    env = dict(os.environ, SACCADE_EXAMPLES_PARSE_ONLY="1")
    env.pop("OPENBLAS_CORETYPE", None)
    failed, checked = [], 0
    for readme in readmes:
        for folder, program, args, number in commands(readme):
            binary = os.path.join(build, "examples", folder, program)
            where = f"{readme}:{number}: {program} {' '.join(args)}"
            if not os.path.exists(binary):
                failed.append(f"{where}\n    no program {binary}")
                continue
            run = subprocess.run([binary] + args, env=env, capture_output=True, text=True, timeout=30)
            checked += 1
            if run.returncode != 0:
                failed.append(f"{where}\n    {run.stderr.strip()}")
    print(f"{checked} commands checked")
    for f in failed:
        print("FAIL:", f)
    sys.exit(1 if failed or checked == 0 else 0)


if __name__ == "__main__":
    main()
