#!/usr/bin/env python3
"""Every driver function the toolkit's cuda.h declares is exported by
simcuda (modelled, or a stub answering CUDA_ERROR_NOT_SUPPORTED: unit_simcuda
calls one). usage: check_exports.py CUDA_H LIBCUDA"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_stubs import declared  # noqa: E402


def main(argv):
    names = declared(open(argv[1], encoding='utf-8', errors='replace').read())
    out = subprocess.run(['nm', '-D', '--defined-only', argv[2]], capture_output=True,
                         text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if ' T ' in line}
    missing = [n for n in names if n not in exported]
    if len(names) < 400:
        print('check_exports: only %d functions found in %s' % (len(names), argv[1]))
        return 1
    if missing:
        print('check_exports: simcuda lacks %d of %d: %s' % (len(missing), len(names),
                                                             ' '.join(missing[:20])))
        return 1
    print('check_exports: all %d functions of cuda.h exported' % len(names))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
