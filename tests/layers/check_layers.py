#!/usr/bin/env python3
"""Dependencies point only downward: fails, naming file, line and both layers, when a source or header
includes a header of a higher layer.

    check_layers.py ROOT LAYERS MODULES

LAYERS is the order, bottom first ("core io compute ..."); MODULES maps each module to its layer
("base=core tensor=core ..."). Both come from the top CMakeLists.txt, which declares every module's
layer once (skainet_module(... LAYER L)). A public header's layer is its folder, include/skainet/L/;
a source's is its module's, src/M/ (the CLI is src/cli, in app). Tests and benchmarks, above
every layer, are not checked.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"skainet/([^"/]+)/([^"]+)"')
FLAT = re.compile(r'^\s*#\s*include\s+"skainet/([^"/]+\.hpp)"')


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    root, layers, modules = sys.argv[1], sys.argv[2].split(), dict(m.split("=") for m in sys.argv[3].split())
    rank = {layer: i for i, layer in enumerate(layers)}
    problems = []
    for layer in os.listdir(os.path.join(root, "include", "skainet")):
        if layer not in rank:
            problems.append(f"include/skainet/{layer}: not a layer (the layers: {' '.join(layers)})")
    files = []
    for base, layer_of in (("include/skainet", lambda rel: rel.split("/")[0]),
                           ("src", lambda rel: modules.get(rel.split("/")[0]))):
        for dirpath, _, names in os.walk(os.path.join(root, base)):
            for name in names:
                if name.endswith((".hpp", ".cpp", ".h")):
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, os.path.join(root, base))
                    files.append((os.path.relpath(path, root), layer_of(rel)))
    for path, layer in files:
        if layer is None:
            problems.append(f"{path}: its module has no layer (skainet_module(... LAYER L) in CMakeLists.txt)")
            continue
        with open(os.path.join(root, path), errors="replace") as f:
            for number, line in enumerate(f, 1):
                if FLAT.match(line):
                    problems.append(f"{path}:{number}: includes a header outside the layer folders: {line.strip()}")
                m = INCLUDE.match(line)
                if not m:
                    continue
                if m[1] not in rank:
                    problems.append(f"{path}:{number}: includes from {m[1]}/, which is not a layer")
                elif rank[m[1]] > rank[layer]:
                    problems.append(f"{path}:{number}: {layer} includes {m[1]}/{m[2]}, a higher layer")
    if problems:
        print("includes against the layer order (" + " < ".join(layers) + "):", file=sys.stderr)
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)
    print(f"{len(files)} files: every include points to its own layer or one below ({' < '.join(layers)})")


if __name__ == "__main__":
    main()
